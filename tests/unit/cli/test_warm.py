"""The warm provision server (provision_agent/cli/warm.py): a run through it gives the command
the same output and exit status as a run in its own process; signals reach the run; a command
that is gone stops its run; a server running other code, or none, leaves the run to the
command; only root reaches it. Server and commands are real processes on a real socket."""

import os
import signal
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
# A stand-in for provision's main() in the server's runs: what a signal did, written down.
TARGET = """
def target(argv):
    import os, signal, sys, time
    if argv[:1] == ["wait"]:
        def stop(sig, frame):
            open(argv[1], "w").write(f"signal {sig} in {os.getcwd()}")
            sys.exit(143)
        signal.signal(signal.SIGTERM, stop)
        open(argv[1] + ".started", "w").write(str(os.getpid()))
        time.sleep(60)
        return 1
    if argv[:1] == ["crash"]:
        os.kill(os.getpid(), signal.SIGKILL)
    print("argv", argv, "stdin", sys.stdin.read(), "env", os.environ.get("WARM_TEST"))
    print("to stderr", file=sys.stderr)
    return 7
"""


@pytest.fixture
def server(tmp_path):
    path = str(tmp_path / "warm" / "socket")
    code = (f"import sys; sys.path.insert(0, {REPO!r})\n{TARGET}\n"
            "from provision_agent.cli import warm\n"
            f"warm.serve({path!r}, preload=('json',), target=target)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert "ready" in proc.stdout.readline()
    yield path
    proc.kill()
    proc.wait()


def command(path, *argv, identity=None, **kwargs):
    """A `provision` command that goes through the server at path (identity: the code it
    says it runs); it prints "none" when the server took nothing."""
    fake = f"warm.code_identity = lambda: {identity!r}\n" if identity else ""
    code = (f"import sys; sys.path.insert(0, {REPO!r})\nfrom provision_agent.cli import warm\n"
            f"{fake}status = warm.run_warm(sys.argv[1:], {path!r})\n"
            "print('none') if status is None else None\nsys.exit(status or 0)")
    return subprocess.Popen([sys.executable, "-c", code, *argv], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, WARM_TEST="passed"), **kwargs)


def test_a_run_gets_the_commands_argv_stdin_environment_and_outputs_and_its_exit(server):
    proc = command(server, "validate", "--x")
    out, err = proc.communicate("the input", timeout=30)
    assert proc.returncode == 7
    assert out == "argv ['validate', '--x'] stdin the input env passed\n"
    assert err == "to stderr\n"


def test_sigterm_to_the_command_reaches_the_run(server, tmp_path):
    marker = tmp_path / "stopped"
    proc = command(server, "wait", str(marker), cwd=str(tmp_path))
    _wait_for(tmp_path / "stopped.started")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == 143
    assert marker.read_text() == f"signal {int(signal.SIGTERM)} in {tmp_path}"


def test_a_command_killed_stops_its_run(server, tmp_path):
    marker = tmp_path / "stopped"
    proc = command(server, "wait", str(marker))
    _wait_for(tmp_path / "stopped.started")
    proc.kill()
    proc.communicate(timeout=30)
    _wait_for(marker)
    assert marker.read_text().startswith(f"signal {int(signal.SIGTERM)} ")


def test_a_run_killed_is_an_error_exit_not_a_success(server):
    proc = command(server, "crash")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGKILL


def test_a_server_running_other_code_takes_nothing(server):
    proc = command(server, "validate", identity="/elsewhere/provision_agent")
    out, _ = proc.communicate("", timeout=30)
    assert (proc.returncode, out) == (0, "none\n")


def test_no_server_no_warm_run(tmp_path):
    proc = command(str(tmp_path / "absent"), "validate")
    out, _ = proc.communicate("", timeout=30)
    assert (proc.returncode, out) == (0, "none\n")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_only_root_reaches_the_socket(server):
    code = ("import os, socket; os.setuid(65534); s = socket.socket(socket.AF_UNIX)\n"
            f"try:\n    s.connect({server!r})\nexcept PermissionError:\n    print('refused')")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.stdout == "refused\n", res.stderr
    assert oct(os.stat(os.path.dirname(server)).st_mode & 0o777) == "0o700"


def test_the_command_without_a_server_runs_provision_itself(tmp_path):
    env = dict(os.environ, PYTHONPATH=REPO)
    res = subprocess.run([sys.executable, "-c", "import sys; from provision_agent.cli import "
                          "warm; warm.SOCKET = sys.argv[1]; sys.exit(warm.main(sys.argv[2:]))",
                          str(tmp_path / "absent"), "--input_data_file", "/nonexistent"],
                         capture_output=True, text=True, env=env)
    assert res.returncode == 2
    assert "/nonexistent: cannot read input" in res.stderr


def _wait_for(path, seconds=20):
    end = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.05)
