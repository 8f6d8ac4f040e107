"""RPC servers in the app (issue 18): the settings panel lists a server's device, a pair loads and
chats on it, and a server killed mid-answer ends the engine's process, not the window: the error
names the server, the conversation stays, and a reload after the server is back answers again."""

from __future__ import annotations

import sqlite3

from app_helpers import ANSWER_TIMEOUT_MS, LOAD_TIMEOUT_MS, ask, load_pair

from engine_bridge.runtime.rpc_server import RpcServerProcess, free_port


def test_settings_panel_probes_the_servers_off_the_ui_thread(qtbot, make_window):
    w = make_window()
    p = w.settings_panel
    w.side_tabs.setCurrentWidget(p)
    dead = f"127.0.0.1:{free_port()}"
    with RpcServerProcess(threads=1) as srv:
        p.rpc_edit.setText(f"{srv.endpoint}, {dead}")
        p.rpc_edit.editingFinished.emit()
        assert w.settings.rpc_servers == f"{srv.endpoint}, {dead}"
        assert w.settings.engine_config().rpc_servers == (srv.endpoint, dead)
        qtbot.waitUntil(lambda: f"RPC {srv.endpoint}" in p.devices_view.text(), timeout=10_000)
        text = p.devices_view.text()
        assert f"GPU0  RPC {srv.endpoint}: " in text and "GiB free" in text
        assert f"{dead}: unreachable" in text and "refused" in text.lower()
    # a list that does not read is said beside the field and kept out of the settings
    p.rpc_edit.setText("gpu-box:port")
    p.rpc_edit.editingFinished.emit()
    assert p.split_error.isVisible() and "port must be a number" in p.split_error.text()
    assert w.settings.rpc_servers == f"{srv.endpoint}, {dead}"


def test_a_server_lost_mid_answer_keeps_the_window_and_the_conversation(
    qtbot, make_window, tiny_pair, store_file, tmp_path
):
    srv = RpcServerProcess(threads=1, log=tmp_path / "server.log").start()
    try:
        w = make_window(n_ctx=1024, max_tokens=8, flash_attn="off", rpc_servers=srv.endpoint)
        load_pair(qtbot, w, tiny_pair)
        assert w.engine.info.describe["target_devices"] == [f"RPC0 ({srv.endpoint})"]
        first = ask(qtbot, w, "Hello")
        assert first.summary.n_generated > 0
        # a long answer; the server dies after a few tokens
        w.settings = w.settings.replace(max_tokens=4000)
        with qtbot.waitSignal(w.answerFailed, timeout=ANSWER_TIMEOUT_MS) as failed:
            w.chat.input.setPlainText("Tell me a long story")
            w.chat.send_button.click()
            qtbot.waitUntil(lambda: len(w.chat.transcript.messages[-1].tokens) >= 5, timeout=ANSWER_TIMEOUT_MS)
            srv.kill()
        exc = failed.args[0]
        assert getattr(exc, "reason", None) == "lost" and exc.endpoint == srv.endpoint
        qtbot.waitUntil(lambda: w.engine.state == "empty", timeout=LOAD_TIMEOUT_MS)
        status = w.chat.status.text()
        assert f"RPC server {srv.endpoint} was lost mid-generation" in status and "reload the pair" in status
        assert w.isVisible()
        # the conversation is kept: both questions and the first answer, in the window and the store
        roles = [(m.role, m.content) for m in w.chat.transcript.messages]
        assert roles[:3] == [("user", "Hello"), ("assistant", first.text), ("user", "Tell me a long story")]
        stored = sqlite3.connect(store_file).execute("SELECT role, content FROM messages ORDER BY id").fetchall()
        assert stored[:3] == roles[:3]
        # the server back on its port: the same pair loads again and answers
        srv = RpcServerProcess(port=srv.port, threads=1, log=tmp_path / "server2.log").start()
        w.settings = w.settings.replace(max_tokens=8)
        load_pair(qtbot, w, tiny_pair)
        again = ask(qtbot, w, "Hello again")
        assert again.summary.n_generated > 0
    finally:
        srv.stop()
