"""The Android device at the ADB protocol boundary: adbutils <-> a fake adb server on loopback.

Every test drives the real `AndroidEnv` (and adbutils inside it) over TCP against
`FakeAdbServer`, whose device runs command lines through a real POSIX shell (dash).
"""

from __future__ import annotations

import time

import numpy as np
import psutil
import pytest
from android_helpers import COLOURS, connected_serial, device, env_kwargs, hierarchy, node
from hypothesis import given, settings
from hypothesis import strategies as st

from devicerl.actions import Action
from devicerl.envs import make
from devicerl.envs.android.input import ADB_KEYBOARD_IME, action_commands, text_commands
from devicerl.envs.android.uiautomator import hierarchy_rotation, parse_hierarchy
from devicerl.errors import (
    ConfigError,
    DataError,
    DeviceCrashed,
    DeviceError,
    DeviceTimeout,
    TaskError,
)
from devicerl.tasks import Task
from devicerl.testing.fake_adb import (
    FakeAdbServer,
    FakeEmulatorConsole,
    android_input_text,
)

TASK = Task("aitw/general/0001", instruction="Open the settings app", max_steps=5, env="android")
NASTY = [
    "hello world",
    "it's $HOME and `uname` $(id) ${PATH}",
    'double "quotes" and \\backslash\\ and \\n literal',
    "100% sure: %s stays %s, %%s too; 50%",
    "semi;colon & amp | pipe > gt < lt * star ? q [a] {b} (c) ~tilde #hash !bang",
    "  leading and trailing spaces  ",
    "-n starts with a dash",
    "tab\tand\nnewline\r\nand CR",
    "%",
    "s",
    "%%%s%s%",
    "",
]


@pytest.fixture
def server():
    with FakeAdbServer([device()]) as srv:
        yield srv


def _env(srv: FakeAdbServer, tmp_path, **kw):
    return make("android", **env_kwargs(srv.port, lock_dir=str(tmp_path), **kw))


# -- uiautomator ---------------------------------------------------------------------------------
def test_uiautomator_dump_becomes_visible_meaningful_elements() -> None:
    nodes = [
        node("android.widget.LinearLayout", (0, 0, 1080, 300)),  # bare layout: dropped
        node("android.widget.Button", (40, 100, 540, 200), text="Sign in", clickable="true"),
        node(
            "android.widget.EditText",
            (40, 300, 1040, 400),
            text="bob@example.com",
            focused="true",
            resource_id="com.example:id/email",
        ),
        node("android.widget.ImageButton", (0, 2200, 200, 2400), content_desc="Back"),
        node("android.widget.CheckBox", (40, 500, 140, 600), checkable="true", checked="true"),
        node("androidx.recyclerview.widget.RecyclerView", (0, 600, 1080, 2600), scrollable="true"),
        node("android.widget.TextView", (0, 700, 500, 800), text="hidden", visible_to_user="false"),
        node("android.widget.TextView", (0, 2500, 500, 2600), text="below the screen"),
        node("android.widget.TextView", (10, 10, 10, 90), text="zero width"),
    ]
    xml = "UI hierchary dumped to: /dev/tty\n" + hierarchy(1080, 2400, nodes)
    els = parse_hierarchy(xml, (1080, 2400), scale=0.5)
    by_text = {e.text: e for e in els}
    assert [e.id for e in els] == [f"n{i}" for i in range(len(els))]
    assert len(els) == 5 and set(by_text) == {"Sign in", "bob@example.com", "Back", ""}
    button = by_text["Sign in"]
    assert button.role == "button" and button.clickable and button.bbox == (20, 50, 270, 100)
    field = by_text["bob@example.com"]
    assert field.role == "textbox" and field.editable and field.focused
    assert field.value == "bob@example.com" and field.attrs["resource_id"] == "com.example:id/email"
    back = by_text["Back"]
    assert back.role == "button" and back.attrs["content_desc"] == "Back" and not back.clickable
    check = next(e for e in els if e.role == "checkbox")
    assert check.attrs["checked"] and check.attrs["checkable"]
    lst = next(e for e in els if e.role == "list")
    assert lst.bbox == (0, 300, 540, 1200)  # clipped to the screen, then scaled
    assert hierarchy_rotation(xml) == 0 and hierarchy_rotation(hierarchy(1, 1, [], 3)) == 3
    with pytest.raises(DataError, match="not valid XML"):
        parse_hierarchy("ERROR: could not get idle state.", (1080, 2400))


# -- input ----------------------------------------------------------------------------------------
def test_actions_map_to_input_commands() -> None:
    size = (1080, 2400)
    assert action_commands(Action.tap(0.5, 0.25), size) == ["input tap 540 600"]
    assert action_commands(Action.tap(1.0, 1.0), size) == ["input tap 1079 2399"]  # on screen
    assert action_commands(Action.swipe(0.5, 0.8, 0.5, 0.2), size, swipe_ms=250) == [
        "input swipe 540 1920 540 480 250"
    ]
    assert action_commands(Action.back(), size) == ["input keyevent 4"]
    assert action_commands(Action.home(), size) == ["input keyevent 3"]
    assert action_commands(Action.enter(), size) == ["input keyevent 66"]
    assert action_commands(Action.type_text("a b"), size) == ["input text a%sb"]
    with pytest.raises(ValueError, match="cannot type 'é'"):
        action_commands(Action.type_text("café"), size)
    assert action_commands(Action.type_text("café"), size, unicode_ime=True) == [
        "am broadcast -a ADB_INPUT_B64 --es msg Y2Fmw6k="
    ]
    with pytest.raises(ValueError):
        action_commands(Action.complete(), size)


_TRICKY = st.sampled_from(["%s", "%", "s", " ", "'", '"', "\\", "$(", "`", "\n", "\t", ";", "-"])
_ASCII = st.characters(min_codepoint=32, max_codepoint=126)


@settings(max_examples=60, deadline=None)
@given(st.lists(_TRICKY | _ASCII, max_size=30).map("".join))
def test_any_ascii_text_is_typed_exactly_through_a_real_shell(text: str) -> None:
    dev = device()
    line = " && ".join(text_commands(text))
    if line:
        assert dev.run(line) == b""  # no shell error output
    assert dev.typed == text


def test_android_percent_s_rule() -> None:
    assert android_input_text("a%sb") == "a b"
    assert android_input_text("%%s") == "% "
    assert android_input_text("%") == "%" and android_input_text("s") == "s"


# -- episodes -------------------------------------------------------------------------------------
def test_episode_through_make_issues_each_action(server, tmp_path) -> None:
    dev = server.devices["emulator-5554"]
    env = _env(server, tmp_path, ui_elements=True, force_stop=["com.android.chrome"])
    obs = env.reset(TASK, seed=3)
    assert dev.inputs == [["am", "force-stop", "com.android.chrome"], ["input", "keyevent", "3"]]
    assert obs.instruction == TASK.instruction and obs.screen_size == (270, 600)
    np.testing.assert_array_equal(obs.screenshot, dev.screens[0].image)
    assert [e.text for e in obs.elements] == ["Screen 0", "Next"]
    button = obs.elements[1]
    assert button.clickable and button.attrs["resource_id"] == "com.example.app:id/next"
    del dev.commands[:]
    r = env.step(Action.tap(*obs.to_normalised(*button.center)))
    assert dev.inputs == [["input", "tap", "135", "330"]]
    assert r.info["adb_input"] == "input tap 135 330" and not r.done and r.reward == 0.0
    np.testing.assert_array_equal(r.observation.screenshot, dev.screens[1].image)
    assert r.observation.elements[0].text == "Screen 1"
    for action, argv in [
        (Action.swipe(0.5, 0.9, 0.5, 0.1), ["input", "swipe", "135", "540", "135", "60", "300"]),
        (Action.back(), ["input", "keyevent", "4"]),
        (Action.enter(), ["input", "keyevent", "66"]),
    ]:
        del dev.commands[:]
        r = env.step(action)
        assert dev.inputs == [argv]
    assert r.truncated is False and env.steps_taken == 4
    r = env.step(Action.home())  # the 5th step: the step budget truncates
    assert dev.inputs[-1] == ["input", "keyevent", "3"]
    assert r.truncated and r.info["end_reason"] == "max_steps" and not r.info["success"]
    obs = env.reset(TASK, seed=4)
    del dev.commands[:]
    r = env.step(Action.complete())  # ends the episode; nothing is sent to the device
    assert r.terminated and r.info["end_reason"] == "agent_ended" and r.reward == 0.0
    assert dev.inputs == [] and r.info["success"] is False  # AitW: a judge decides success
    env.close()


def test_typed_text_reaches_the_device_exactly(server, tmp_path) -> None:
    dev = server.devices["emulator-5554"]
    env = _env(server, tmp_path, screenshot_format="raw")
    env.reset(TASK, 0)
    for text in NASTY:
        dev.typed = ""
        r = env.step(Action.type_text(text))
        assert dev.typed == text.replace("\r\n", "\n"), r.info
        assert "invalid_action" not in r.info
        if env.episode_over:
            env.reset(TASK, 0)
    env.close()


def test_non_ascii_text_needs_adbkeyboard(server, tmp_path) -> None:
    dev = server.devices["emulator-5554"]
    text = "Café 東京 🚀 naïve"
    env = _env(server, tmp_path)
    env.reset(TASK, 0)
    del dev.commands[:]
    r = env.step(Action.type_text(text))
    assert "ADBKeyboard" in r.info["invalid_action"] and "'é東京🚀ï'" in r.info["invalid_action"]
    assert dev.inputs == [] and dev.typed == ""  # a no-op, not a garbled half-typed text
    env.close()
    dev.ime = ADB_KEYBOARD_IME  # the IME is active: the env finds it at connect
    env = _env(server, tmp_path)
    env.reset(TASK, 0)
    r = env.step(Action.type_text(text))
    assert "invalid_action" not in r.info and dev.typed == text
    assert dev.inputs[-1][:3] == ["am", "broadcast", "-a"]
    env.close()
    env = _env(server, tmp_path, unicode_text="reject")
    env.reset(TASK, 0)
    assert "invalid_action" in env.step(Action.type_text(text)).info
    env.close()


def test_raw_frames_downscaling_and_device_pixels(tmp_path) -> None:
    dev = device(size=(1080, 2400))
    with FakeAdbServer([dev]) as srv:
        for fmt in ("png", "raw"):
            env = _env(srv, tmp_path, screenshot_format=fmt, ui_elements=True)
            obs = env.reset(TASK, 0)
            np.testing.assert_array_equal(obs.screenshot, dev.screens[0].image)
            env.close()
        env = _env(srv, tmp_path, max_side=600, ui_elements=True)
        assert env.screen_size == (270, 600)  # known before the first reset (`wm size`)
        obs = env.reset(TASK, 0)
        assert obs.screenshot.shape == (600, 270, 3) and obs.screen_size == (270, 600)
        assert tuple(obs.screenshot[300, 5]) == COLOURS[0]
        assert obs.elements[1].bbox == (67.5, 300.0, 202.5, 360.0)  # screenshot pixels
        del dev.commands[:]
        env.step(Action.tap(*obs.to_normalised(*obs.elements[1].center)))
        assert dev.inputs == [["input", "tap", "540", "1320"]]  # device pixels
        env.close()


def test_elements_only_uses_wm_size_and_rotation(tmp_path) -> None:
    dev = device()
    dev.screens[1].xml = hierarchy(600, 270, [], rotation=1)
    with FakeAdbServer([dev]) as srv:
        env = _env(srv, tmp_path, screenshot=False, ui_elements=True)
        obs = env.reset(TASK, 0)
        assert obs.screenshot is None and obs.screen_size == (270, 600)
        assert [e.text for e in obs.elements] == ["Screen 0", "Next"]
        assert not any(c[0] == "screencap" for c in dev.commands)
        r = env.step(Action.tap(0.5, 0.5))  # the next screen is landscape
        assert r.observation.screen_size == (600, 270)
        del dev.commands[:]
        env.step(Action.tap(0.5, 0.5))
        assert dev.inputs == [["input", "tap", "300", "135"]]
        dev.ui_fails = True
        r = env.step(Action.back())
        assert (
            r.observation.elements == []
            and "could not get idle state" in (r.observation.extras["ui_error"])
        )
        env.close()


# -- failures -------------------------------------------------------------------------------------
def _adb_processes() -> list[str]:
    return [p.info["name"] for p in psutil.process_iter(["name"]) if p.info["name"] == "adb"]


def test_a_device_that_stops_answering_times_out(server, tmp_path) -> None:
    dev = server.devices["emulator-5554"]
    env = _env(server, tmp_path, command_timeout_s=0.3)
    env.reset(TASK, 0)
    dev.hang = True
    t0 = time.monotonic()
    with pytest.raises(DeviceTimeout, match=r"emulator-5554.*no answer within 0.3s"):
        env.step(Action.tap(0.5, 0.5))
    assert time.monotonic() - t0 < 5  # the env's own deadline, not adbutils' 10 minutes
    with pytest.raises(DeviceCrashed, match="not connected"):
        env.step(Action.tap(0.5, 0.5))
    dev.hang = False
    obs = env.reset(TASK, 0)  # reconnects
    assert obs.screenshot is not None
    env.close()


def test_a_dropped_server_crashes_and_the_next_reset_reconnects(server, tmp_path) -> None:
    before = _adb_processes()
    env = _env(server, tmp_path)
    env.reset(TASK, 0)
    server.drop()
    with pytest.raises(DeviceCrashed, match="adb server unreachable"):
        env.step(Action.tap(0.5, 0.5))
    with pytest.raises(DeviceCrashed):
        env.reset(TASK, 0)
    assert _adb_processes() == before  # no local adb server was started behind our back
    server.restart()
    assert env.reset(TASK, 0).screenshot is not None
    env.close()


def test_unplugged_and_offline_devices_crash(server, tmp_path) -> None:
    env = _env(server, tmp_path, serial="emulator-5554")
    env.reset(TASK, 0)
    dev = server.remove("emulator-5554")
    with pytest.raises(DeviceCrashed, match="device 'emulator-5554' not found"):
        env.step(Action.back())
    with pytest.raises(DeviceCrashed, match="is absent"):
        env.reset(TASK, 0)
    server.devices[dev.serial] = dev
    dev.state = "offline"
    with pytest.raises(DeviceCrashed, match="is offline"):
        env.reset(TASK, 0)
    dev.state = "device"
    env.reset(TASK, 0)
    env.close()


def test_envs_claim_distinct_devices(tmp_path) -> None:
    devs = [device("emulator-5554"), device("emulator-5556"), device("R58M123ABC")]
    with FakeAdbServer(devs) as srv:
        wanted = ["emulator-5554", "emulator-5556"]
        envs = [_env(srv, tmp_path, serials=wanted) for _ in range(3)]
        envs[0].reset(TASK, 0)
        envs[1].reset(TASK, 0)
        assert {connected_serial(envs[0]), connected_serial(envs[1])} == set(wanted)
        with pytest.raises(DeviceCrashed, match="no free device"):
            envs[2].reset(TASK, 0)
        taken = connected_serial(envs[0])
        envs[0].close()  # releases its device
        envs[2].reset(TASK, 0)
        assert connected_serial(envs[2]) == taken
        pinned = _env(srv, tmp_path, serial=taken)
        with pytest.raises(DeviceCrashed, match="in use by another devicerl env"):
            pinned.reset(TASK, 0)
        for e in envs[1:]:
            e.close()
        pinned.reset(TASK, 0)
        pinned.close()


def test_network_devices_are_connected_on_reset(tmp_path) -> None:
    dev = device("10.0.2.15:5555", network=True)
    with FakeAdbServer([dev]) as srv:
        env = _env(srv, tmp_path, serial="10.0.2.15:5555")
        env.reset(TASK, 0)
        assert "host:connect:10.0.2.15:5555" in srv.requests and dev.connected
        env.close()


def test_emulator_snapshot_is_loaded_on_reset(server, tmp_path) -> None:
    dev = server.devices["emulator-5554"]
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    loads = []
    console = FakeEmulatorConsole("s3cret", ("clean",), on_load=loads.append)
    kw = {"emulator_console_port": console.port, "emulator_console_token_file": str(token)}
    env = _env(server, tmp_path, snapshot="clean", **kw)
    env.reset(TASK, 0)
    assert console.commands == ["auth s3cret", "avd snapshot load clean", "quit"]
    assert loads == ["clean"] and dev.inputs[-1] == ["input", "keyevent", "3"]
    env.close()
    env = _env(server, tmp_path, snapshot="missing", **kw)
    with pytest.raises(DeviceError, match="snapshot 'missing' does not exist"):
        env.reset(TASK, 0)
    env.close()
    env = _env(server, tmp_path, snapshot="clean", emulator_console_port=console.port)
    env.console_token = str(tmp_path / "absent")
    with pytest.raises(ConfigError, match="emulator_console_token_file"):
        env.reset(TASK, 0)
    env.close()
    console.close()
    phone = device("R58M123ABC")
    with FakeAdbServer([phone]) as srv:
        env = _env(srv, tmp_path, snapshot="clean")
        with pytest.raises(ConfigError, match="needs an emulator"):
            env.reset(TASK, 0)
        env.close()


def test_bad_options_and_tasks_fail_clearly(server, tmp_path) -> None:
    with pytest.raises(ConfigError, match="invalid package names"):
        make("android", force_stop=["com.x; rm -rf /"])
    with pytest.raises(ConfigError, match="screenshot_format"):
        make("android", screenshot_format="jpeg")
    with pytest.raises(ConfigError, match="nothing to observe"):
        make("android", screenshot=False)
    with pytest.raises(ConfigError, match="snapshot name"):
        make("android", snapshot="a b")
    env = _env(server, tmp_path)
    with pytest.raises(TaskError, match="no instruction"):
        env.reset(Task("aitw/x"), 0)
    with pytest.raises(TaskError, match="not android"):
        env.reset(Task("web/x", instruction="hi", env="browser"), 0)
    env.close()
