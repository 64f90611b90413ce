"""Screenshot codecs and store layouts, side by side: write speed, read speed, size.

Part 1 (codecs): encode/decode time and bytes per frame for PNG (zlib level 1 and 6), WebP
lossless, JPEG q90, WebP q90 and raw+zstd, on phone-sized (540x1170) and MiniWoB-sized (160x210)
frames. Frames are UI-like: anti-aliased text rows, buttons, and (for the phone) photo thumbnails
cut from a real photograph shipped with matplotlib, so compression ratios resemble real screens.

Part 2 (layouts): the same episodes written as Parquet shards with the screenshots in a binary
column, versus content-addressed image files (sha256 names) plus a Parquet shard holding their
hashes; then read back fully. Episodes repeat some frames (an agent's no-op taps) so the
deduplication of content-addressed files is credited.

Part 3 (flush policy): the real `TrajectoryWriter` flushing a shard every episode versus every
16 episodes.

    python benchmarks/store_codec.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from devicerl.data.codec import DEFAULT_CODEC, decode_image, encode_image, image_error

CODECS = ("png", "png:6", "webp-lossless", "jpeg:90", "webp:90", "raw")
SIZES = {"phone_540x1170": (540, 1170), "miniwob_160x210": (160, 210)}
REPEAT_P = 0.3  # chance that a step repeats the previous screen


def _photo() -> np.ndarray:
    import matplotlib.cbook
    from PIL import Image

    with matplotlib.cbook.get_sample_data("grace_hopper.jpg") as f:
        return np.asarray(Image.open(f).convert("RGB"))


def ui_frame(width: int, height: int, seed: int, photo: np.ndarray) -> np.ndarray:
    """A UI-like screenshot: status bar, toolbar, list rows with text and thumbnails."""
    from PIL import Image, ImageDraw, ImageFont

    rng = np.random.default_rng(seed)
    img = Image.new("RGB", (width, height), (250, 250, 250))
    draw = ImageDraw.Draw(img)
    scale = width / 540
    font = ImageFont.load_default(size=max(8, int(22 * scale)))
    small = ImageFont.load_default(size=max(7, int(16 * scale)))
    draw.rectangle((0, 0, width, int(40 * scale)), fill=(33, 33, 33))
    clock = f"12:{rng.integers(60):02d}  LTE  87%"
    draw.text((8, 6), clock, fill=(255, 255, 255), font=small)
    draw.rectangle((0, int(40 * scale), width, int(110 * scale)), fill=(25, 118, 210))
    draw.text((16, int(60 * scale)), "Shopping results", fill=(255, 255, 255), font=font)
    row_h = max(24, int(150 * scale))
    thumb = max(16, int(120 * scale))
    words = ["phone", "case", "charger", "cable", "laptop", "stand", "mouse", "keyboard"]
    y = int(120 * scale)
    while y + row_h < height:
        top, left = rng.integers(0, photo.shape[0] - 200), rng.integers(0, photo.shape[1] - 200)
        patch = Image.fromarray(photo[top : top + 200, left : left + 200]).resize((thumb, thumb))
        img.paste(patch, (10, y + 5))
        title = " ".join(rng.choice(words, size=4))
        draw.text((thumb + 20, y + 8), title.title(), fill=(20, 20, 20), font=font)
        price = f"${rng.integers(5, 500)}.{rng.integers(100):02d}  * {rng.uniform(3, 5):.1f}"
        draw.text((thumb + 20, y + 8 + int(34 * scale)), price, fill=(90, 90, 90), font=small)
        bx = width - int(130 * scale)
        draw.rounded_rectangle(
            (bx, y + row_h - int(50 * scale), width - 10, y + row_h - int(12 * scale)),
            radius=int(10 * scale),
            fill=(255, 193, 7),
        )
        draw.line((0, y + row_h, width, y + row_h), fill=(220, 220, 220), width=1)
        y += row_h + 4
    return np.asarray(img, dtype=np.uint8)


def _best_times(jobs: dict[str, Callable[[], object]], reps: int) -> dict[str, float]:
    """Best-of-``reps`` time of each job, the jobs interleaved round by round so that load
    from other processes hits them alike."""
    best = {name: float("inf") for name in jobs}
    for _ in range(reps):
        for name, fn in jobs.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def bench_codecs(frames: dict[str, list[np.ndarray]], reps: int) -> dict:
    out: dict = {}
    for size_name, imgs in frames.items():
        blobs = {c: [encode_image(f, c) for f in imgs] for c in CODECS}
        enc = _best_times({c: partial(_encode_all, imgs, c) for c in CODECS}, reps)
        dec = _best_times({c: partial(_decode_all, blobs[c]) for c in CODECS}, reps)
        rows = {}
        for codec in CODECS:
            size = statistics.mean(len(b) for b in blobs[codec])
            stored = statistics.mean(len(pa.compress(b, codec="zstd")) for b in blobs[codec])
            err = image_error(imgs[0], decode_image(blobs[codec][0]))
            rows[codec] = {
                "encode_ms": enc[codec] / len(imgs) * 1e3,
                "decode_ms": dec[codec] / len(imgs) * 1e3,
                "bytes": size,
                "bytes_in_parquet_zstd": min(size, stored),
                "compression_x": imgs[0].nbytes / size,
                "mean_abs_error": err["mean_abs_error"],
                "psnr_db": err["psnr_db"],
            }
        out[size_name] = rows
    return out


def _encode_all(imgs: list[np.ndarray], codec: str) -> None:
    for f in imgs:
        encode_image(f, codec)


def _decode_all(blobs: list[bytes]) -> None:
    for b in blobs:
        decode_image(b)


def _episodes(size: tuple[int, int], n_eps: int, steps: int, repeat_p: float, photo: np.ndarray):
    """Episodes of distinct frames, except that with probability ``repeat_p`` a step repeats
    the previous frame (a no-op tap), as the same array object."""
    rng = np.random.default_rng(1)
    eps = []
    for e in range(n_eps):
        ep = [ui_frame(*size, seed=e * 1000, photo=photo)]
        for s in range(1, steps):
            same = rng.random() < repeat_p
            ep.append(ep[-1] if same else ui_frame(*size, seed=e * 1000 + s, photo=photo))
        eps.append(ep)
    return eps


def _encode_episode(ep: list[np.ndarray], codec: str, dedup: bool) -> list[bytes | None]:
    """Encoded frames; with ``dedup`` a repeat of the previous frame is stored as None."""
    return [
        None if dedup and i and f is ep[i - 1] else encode_image(f, codec) for i, f in enumerate(ep)
    ]


def _write_table(table: pa.Table, path: Path) -> None:
    tmp = path.with_name("." + path.name + ".tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def _column_layout(eps: list[list[np.ndarray]], codec: str, root: Path) -> None:
    for i, ep in enumerate(eps):
        blobs = _encode_episode(ep, codec, dedup=True)
        table = pa.table({"step": list(range(len(ep))), "screenshot": pa.array(blobs, pa.binary())})
        _write_table(table, root / f"shard-{i:05d}.parquet")


def _cas_layout(eps: list[list[np.ndarray]], codec: str, root: Path) -> None:
    img_dir = root / "images"
    for i, ep in enumerate(eps):
        hashes = []
        for blob in _encode_episode(ep, codec, dedup=False):
            h = hashlib.sha256(blob).hexdigest()
            path = img_dir / h[:2] / h
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name("." + h + ".tmp")
                tmp.write_bytes(blob)
                os.replace(tmp, path)
            hashes.append(h)
        table = pa.table({"step": list(range(len(ep))), "screenshot_sha256": hashes})
        _write_table(table, root / f"shard-{i:05d}.parquet")


def _read_column(root: Path) -> int:
    n = 0
    for p in sorted(root.glob("shard-*.parquet")):
        for blob in pq.read_table(p).column("screenshot").to_pylist():
            n += 0 if blob is None else len(decode_image(blob))
    return n


def _read_cas(root: Path) -> int:
    n = 0
    for p in sorted(root.glob("shard-*.parquet")):
        for h in pq.read_table(p).column("screenshot_sha256").to_pylist():
            n += len(decode_image((root / "images" / h[:2] / h).read_bytes()))
    return n


def _disk_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def bench_layouts(eps: list[list[np.ndarray]], codec: str) -> dict:
    n_eps, steps = len(eps), len(eps[0])
    out: dict = {"episodes": n_eps, "steps": steps, "codec": codec, "repeat_p": REPEAT_P}
    base = Path(tempfile.mkdtemp(prefix="devicerl-bench-"))
    layouts = (
        ("binary_column", _column_layout, _read_column),
        ("content_addressed", _cas_layout, _read_cas),
    )
    try:
        # Two interleaved rounds, best of each, so warm-up and noise hit both layouts alike.
        times: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in layouts}
        for rnd in range(2):
            for name, write, read in layouts:
                root = base / f"{name}-{rnd}"
                root.mkdir()
                t0 = time.perf_counter()
                write(eps, codec, root)
                t1 = time.perf_counter()
                read(root)
                times[name].append((t1 - t0, time.perf_counter() - t1))
        for name, _, _ in layouts:
            root = base / f"{name}-1"
            wt = min(w for w, _ in times[name])
            rt = min(r for _, r in times[name])
            files = sum(1 for p in root.rglob("*") if p.is_file())
            out[name] = {
                "write_s": wt,
                "read_s": rt,
                "disk_bytes": _disk_bytes(root),
                "files": files,
                "write_steps_per_s": n_eps * steps / wt,
                "read_steps_per_s": n_eps * steps / rt,
            }
    finally:
        shutil.rmtree(base, ignore_errors=True)
    c, a = out["binary_column"], out["content_addressed"]
    out["ratios"] = {
        "write_speed_column_over_cas": a["write_s"] / c["write_s"],
        "read_speed_column_over_cas": a["read_s"] / c["read_s"],
        "size_column_over_cas": c["disk_bytes"] / a["disk_bytes"],
    }
    return out


def bench_flush(n_eps: int, size: tuple[int, int]) -> dict:
    """The real writer on real synthetic-device episodes: a shard per episode (with and
    without fsync) vs a shard per 16 episodes."""
    from devicerl.agents import RandomPolicy
    from devicerl.data.store import TrajectoryWriter
    from devicerl.envs import make
    from devicerl.runtime.acting.rollout import rollout

    env, policy = make("synthetic", screen=size, seed=0), RandomPolicy(seed=0)
    trajs = [rollout(env, policy, "synthetic/steps", seed=i) for i in range(n_eps)]
    out: dict = {"episodes": n_eps, "steps": sum(t.length for t in trajs), "codec": DEFAULT_CODEC}
    for name, every, fsync in (
        ("every_1", 1, True),
        ("every_1_nofsync", 1, False),
        ("every_16", 16, True),
    ):
        root = Path(tempfile.mkdtemp(prefix="devicerl-bench-"))
        try:
            t0 = time.perf_counter()
            with TrajectoryWriter(root, flush_every=every, flush_interval_s=None, fsync=fsync) as w:
                w.extend(trajs)
            dt = time.perf_counter() - t0
            out[name] = {
                "episodes_per_s": n_eps / dt,
                "steps_per_s": out["steps"] / dt,
                "disk_bytes": _disk_bytes(root),
                "files": len(list(root.glob("*.parquet"))),
            }
        finally:
            shutil.rmtree(root, ignore_errors=True)
    base = out["every_1"]["episodes_per_s"]
    out["ratio_every16_over_every1"] = out["every_16"]["episodes_per_s"] / base
    out["ratio_nofsync_over_fsync"] = out["every_1_nofsync"]["episodes_per_s"] / base
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer frames and episodes")
    ap.add_argument("--json", default=None, help="write results to this JSON file")
    args = ap.parse_args(argv)
    n_frames, reps = (4, 2) if args.quick else (12, 5)
    n_eps, steps = (6, 8) if args.quick else (20, 10)
    photo = _photo()
    frames = {
        name: [ui_frame(w, h, seed=i, photo=photo) for i in range(n_frames)]
        for name, (w, h) in SIZES.items()
    }
    result: dict = {"codecs": bench_codecs(frames, reps), "layouts": {}}
    for name, size in SIZES.items():
        eps = _episodes(size, n_eps, steps, repeat_p=REPEAT_P, photo=photo)
        result["layouts"][name] = bench_layouts(eps, codec=DEFAULT_CODEC)
    result["flush"] = bench_flush(n_eps * 4, SIZES["miniwob_160x210"])
    _print(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


def _print(result: dict) -> None:
    for size_name, rows in result["codecs"].items():
        print(f"\ncodecs, {size_name}:")
        print(
            f"  {'codec':14} {'enc ms':>8} {'dec ms':>8} {'KiB':>8} {'ratio':>7} "
            f"{'KiB+zstd':>9} {'PSNR':>7}"
        )
        for codec, r in rows.items():
            print(
                f"  {codec:14} {r['encode_ms']:8.2f} {r['decode_ms']:8.2f} "
                f"{r['bytes'] / 1024:8.1f} {r['compression_x']:6.1f}x "
                f"{r['bytes_in_parquet_zstd'] / 1024:9.1f} {r['psnr_db']:7.1f}"
            )
    for size_name, r in result["layouts"].items():
        q = r["ratios"]
        print(
            f"\nlayouts, {size_name} ({r['episodes']} eps x {r['steps']} steps, {r['codec']}): "
            f"column/CAS write speed {q['write_speed_column_over_cas']:.2f}x, "
            f"read speed {q['read_speed_column_over_cas']:.2f}x, "
            f"size {q['size_column_over_cas']:.2f}x; files "
            f"{r['binary_column']['files']} vs {r['content_addressed']['files']}"
        )
    f = result["flush"]
    print(
        f"\nwriter ({f['episodes']} episodes, {f['steps']} steps, {f['codec']}): "
        f"{f['every_1']['episodes_per_s']:.0f} episodes/s with a shard per episode, "
        f"{f['every_1_nofsync']['episodes_per_s']:.0f} without fsync "
        f"({f['ratio_nofsync_over_fsync']:.2f}x), {f['every_16']['episodes_per_s']:.0f} with a "
        f"shard per 16 episodes ({f['ratio_every16_over_every1']:.2f}x)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
