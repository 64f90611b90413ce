"""Malformed ADP input: each case is one line naming the file, the line and the field (exit code
2), and nothing is written: a new import folder does not appear, an existing one keeps exactly
what it held. A good first line does not make it in when the second is bad."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from devicerl.cli.main import main
from devicerl.data.adp.read import MAX_STEPS


def _image_observation(path: str) -> dict:
    return {"class_": "image_observation", "content": path, "annotations": [], "source": "user"}


def _record(**changes) -> dict:
    rec = {
        "schema_version": "1.2.0",
        "id": "t",
        "content": [
            {"class_": "text_observation", "content": "tap it", "source": "user"},
            _image_observation("img/a.png"),
            {"class_": "api_action", "function": "click", "kwargs": {"x": 2, "y": 3}},
        ],
        "details": {},
    }
    rec.update(changes)
    return rec


def _action(**kw) -> dict:
    return {"class_": "api_action", "function": "click", "kwargs": {"x": 2, "y": 3}, **kw}


def _with(*items) -> dict:
    return _record(content=[_record()["content"][0], *items])


GOOD = json.dumps(_record())
HUGE_INT = "1" + "0" * 5000
BOX = {"element_type": "button", "bounding_box": "0,0,4,4", "text": "OK"}
HUGE_PAGE = {
    "class_": "web_observation", "html": None, "axtree": None, "url": "u",
    "image_observation": None, "viewport_size": [10**9, 2],
}  # fmt: skip
BOX_AS_TEXT = {"element_type": "button", "bounding_box": "0,0,4,4", "text": "OK"}
HUGE_PAGE = {
    "class_": "web_observation", "html": None, "axtree": None, "url": "u",
    "image_observation": None, "viewport_size": [10**9, 2],
}  # fmt: skip

CASES = {
    "truncated JSON": (GOOD[: len(GOOD) // 2], "line 2: not valid JSON"),
    "content not a list": (
        json.dumps(_record(content={"a": 1})),
        "content is missing or not a list",
    ),
    "coordinate as text": (
        json.dumps(_with(_image_observation("img/a.png"), _action(kwargs={"x": "2", "y": 3}))),
        "content[2].kwargs.x is str",
    ),
    "box as text": (
        json.dumps(_with({**_image_observation("img/a.png"), "annotations": [BOX]}, _action())),
        "content[1].annotations[0].bounding_box is missing or not an object",
    ),
    "unknown item": (json.dumps(_with({"class_": "video_observation"})), "is not one of"),
    "newer major version": (json.dumps(_record(schema_version="2.0.0")), "not an ADP 1.x version"),
    "infinite coordinate": (
        GOOD.replace('"x": 2', '"x": 1e999'),
        "content[2].kwargs.x inf is not a finite coordinate",
    ),
    "huge coordinate": (GOOD.replace('"x": 2', '"x": 1e300'), "is not a finite coordinate"),
    "huge reward": (json.dumps(_with(_action(reward=1e308))), "content[1].reward 1e+308"),
    "a number of 5000 digits": (GOOD.replace('"x": 2', f'"x": {HUGE_INT}'), "not valid JSON"),
    "huge viewport": (
        json.dumps(_with(HUGE_PAGE, _action())),
        "content[1].viewport_size [1000000000, 2] is outside",
    ),
    "malformed details": (
        json.dumps(_record(details={"devicerl": '{"steps": [{"log_prob": "x"}]}'})),
        "details.devicerl.steps[0].log_prob 'x' is not a finite number",
    ),
    "details out of line with the actions": (
        json.dumps(_record(details={"devicerl": '{"steps": [{}, {}]}'})),
        "details.devicerl.steps holds 2 entries for 1 actions",
    ),
    "absolute image path": (
        json.dumps(_with(_image_observation("/etc/hostname"), _action())),
        "image path '/etc/hostname' leads outside the dataset folder: refused",
    ),
    "image path with ..": (
        json.dumps(_with(_image_observation("img/../../secret.png"), _action())),
        "image path 'img/../../secret.png' leads outside the dataset folder: refused",
    ),
    "link out of the folder": (
        json.dumps(_with(_image_observation("img/link.png"), _action())),
        "leads outside",
    ),
    "missing image": (
        json.dumps(_with(_image_observation("img/nope.png"), _action())),
        "image 'img/nope.png' is not in the dataset folder",
    ),
    "not an image": (
        json.dumps(_with(_image_observation("img/text.png"), _action())),
        "content[1].content: image 'img/text.png': unknown image encoding",
    ),
    f"{10**5} steps in one trajectory": (
        json.dumps(_with(*[_action() for _ in range(10**5)])),
        f"100000 steps in one trajectory, more than the {MAX_STEPS} allowed",
    ),
}


@pytest.fixture
def dataset(tmp_path) -> Path:
    root = tmp_path / "data"
    (root / "img").mkdir(parents=True)
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(root / "img" / "a.png")
    (root / "img" / "text.png").write_text("not a png")
    (tmp_path / "secret.png").write_bytes((root / "img" / "a.png").read_bytes())
    os.symlink(tmp_path / "secret.png", root / "img" / "link.png")
    return root


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file of an import folder but its lock, with its bytes."""
    files = (p for p in folder.rglob("*") if p.is_file() and p.name != ".lock")
    return {str(p.relative_to(folder)): p.read_bytes() for p in files}


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_input_is_one_line_and_writes_nothing(dataset, tmp_path, capsys, case) -> None:
    text, message = CASES[case]
    (dataset / "good.jsonl").write_text(GOOD + "\n")
    existing = tmp_path / "existing"
    assert main(["import-adp", str(dataset / "good.jsonl"), "--out", str(existing)]) == 0
    before = _tree(existing)
    capsys.readouterr()
    bad = dataset / "bad.jsonl"
    bad.write_text(GOOD.replace('"id": "t"', '"id": "u"') + "\n" + text + "\n")
    for out in (tmp_path / "new", existing):
        assert main(["import-adp", str(bad), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("devicerl import-adp: error: "), err
        assert f"{bad}: line 2" in err and message in err, err
    assert not (tmp_path / "new").exists()
    assert _tree(existing) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "existing", "secret.png"]


def test_a_trajectorys_images_have_a_decoded_budget(dataset, monkeypatch, capsys) -> None:
    import devicerl.data.adp.read as read

    monkeypatch.setattr(read, "MAX_DECODED_BYTES", 100)  # one 8x8 screen decodes to 192 bytes
    (dataset / "one.jsonl").write_text(GOOD + "\n")
    assert main(["import-adp", str(dataset / "one.jsonl"), "--out", str(dataset / "o")]) == 2
    assert "line 1: content[1].content: the trajectory's images decode to more than" in (
        capsys.readouterr().err
    )
    assert not (dataset / "o").exists()


def test_a_json_array_file_names_the_trajectory(dataset, capsys) -> None:
    (dataset / "sample.json").write_text(json.dumps([_record(), _record(content=7)]))
    assert main(["import-adp", str(dataset / "sample.json"), "--out", str(dataset / "o")]) == 2
    assert "sample.json: trajectory 1: content is missing" in capsys.readouterr().err


def test_a_missing_file_or_an_empty_folder_is_refused_before_any_work(tmp_path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    for src in (tmp_path / "nope.jsonl", tmp_path / "empty"):
        assert main(["import-adp", str(src), "--out", str(tmp_path / "o")]) == 2
        assert str(src) in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
