"""A hashing tokenizer: words and character n-grams to bucket ids, with no vocabulary file.

Nothing is downloaded or trained: a word maps to the hash of the word plus the hashes of its
character trigrams (``#wo``, ``wor``, ``ord``, ``rd#``), so unseen words that share pieces with
known ones still get related embeddings. Hashes use CRC32, which is stable across processes
(Python's ``hash`` is salted per process and would break saved models).
"""

from __future__ import annotations

import re
import zlib
from functools import lru_cache

#: Words are runs of letters/digits/underscore; every other non-space character is its own token.
_WORD_RE = re.compile(r"\w+|[^\w\s]")

Token = tuple[str, int, int]  # (text, char start, char end)


def split_words(text: str) -> list[Token]:
    """Tokens of ``text`` with their character spans (``text[start:end] == token``)."""
    return [(m.group(0), m.start(), m.end()) for m in _WORD_RE.finditer(text)]


def stable_hash(s: str, buckets: int) -> int:
    """A bucket id in ``[1, buckets)``; 0 is reserved for padding."""
    return zlib.crc32(s.encode("utf-8")) % (buckets - 1) + 1


class HashTokenizer:
    """Maps a word to a short tuple of bucket ids (the word and its character n-grams).

    ``namespace`` separates uses of the same word (e.g. an element's text and its value) so the
    model can tell them apart while sharing the n-gram pieces.
    """

    def __init__(self, buckets: int = 8192, ngram: int = 3, pieces_per_word: int = 6) -> None:
        if buckets < 2 or ngram < 1 or pieces_per_word < 1:
            raise ValueError("need buckets >= 2, ngram >= 1 and pieces_per_word >= 1")
        self.buckets = buckets
        self.ngram = ngram
        self.pieces_per_word = pieces_per_word
        self._cached = lru_cache(maxsize=65536)(self._pieces)

    def _pieces(self, word: str, namespace: str) -> tuple[int, ...]:
        w = word.lower()
        ids = [stable_hash(f"{namespace}w:{w}", self.buckets)]
        padded = f"#{w}#"
        if len(padded) > self.ngram:
            grams = [padded[i : i + self.ngram] for i in range(len(padded) - self.ngram + 1)]
            ids.extend(stable_hash(f"g:{g}", self.buckets) for g in grams)
        return tuple(ids[: self.pieces_per_word])

    def word_ids(self, word: str, namespace: str = "") -> tuple[int, ...]:
        """Bucket ids of one word (first the whole word, then its n-grams)."""
        return self._cached(word, namespace)

    def text_ids(self, text: str, max_ids: int, namespace: str = "") -> list[int]:
        """Bucket ids of all words of ``text``, cut at ``max_ids`` (whole words first)."""
        out: list[int] = []
        words = [t for t, _, _ in split_words(text)]
        for w in words:  # whole-word ids first, so long texts keep every word
            out.append(self.word_ids(w, namespace)[0])
        for w in words:
            out.extend(self.word_ids(w, namespace)[1:])
            if len(out) >= max_ids:
                break
        return out[:max_ids]
