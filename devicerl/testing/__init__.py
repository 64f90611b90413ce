"""Test doubles users may reuse in their own tests; the product never imports them.

- `devicerl.testing.fake_adb`: a loopback adb server (`FakeAdbServer`) with scripted devices, so
  Android code is tested at the ADB protocol boundary without an emulator.
- `devicerl.testing.chat_server`: a scripted OpenAI-compatible chat-completions server
  (`ScriptedChatServer`) for API agents and VLM judges.
- `devicerl.testing.autoui_tiny`: tiny random AutoUI-format checkpoints (`build_tiny_autoui`).
"""
