"""The ramdisk's iSCSI login and the installed system's node records (issue 56): CHAP secrets
only in files of mode 0600, never in argv, a log line or an error."""

import logging
import os
import stat

import pytest

from provision_agent.drivers import iscsi
from provision_agent.errors import (
    EXIT_IMAGE_ERROR,
    EXIT_MACHINE_MISMATCH,
    ImageError,
    MachineMismatch,
)
from provision_agent.plan import iscsi as names
from provision_agent.plan.model import IscsiTarget
from tests.unit.fakes import FakeRunner

SECRET, MUTUAL = "S3cretChapPass-7f1d", "Mutu4lSecret-9a2e"
IQN = "iqn.2026-11.example.provision:root"
RECORD = "# BEGIN RECORD 2.1.8\nnode.name = {iqn}\nnode.startup = manual\n" \
         "node.session.auth.authmethod = None\nnode.conn[0].startup = manual\n# END RECORD\n"


def lun(**kw):
    kw = {"portal": "10.0.2.2:3260", "target": IQN, "lun": 1, "chap_username": "node1",
          "chap_password": SECRET, "mutual_username": "tgt", "mutual_password": MUTUAL} | kw
    return IscsiTarget(**kw)


class Initiator(FakeRunner):
    """iscsiadm and udev as the ramdisk has them: `-o new` makes the record, `--login` the
    LUN's by-path link (unless the target refuses the login or exports no such LUN)."""

    def __init__(self, etc, dev, refuse=False, no_lun=False):
        super().__init__({"pidof iscsid": (1, ""), "iscsi-iname": "iqn.2004-10.com.ubuntu:01:ab\n"})
        self.etc, self.dev, self.refuse, self.no_lun = etc, dev, refuse, no_lun

    def run(self, argv, check=True, timeout=None, input=None, ok_codes=(0,), log_input=False):
        line = " ".join(str(a) for a in argv)
        if line.startswith("iscsiadm") and "-o new" in line:
            t = argv[argv.index("-T") + 1]
            address, port = names.parse_portal(argv[argv.index("-p") + 1])
            d = self.etc / "nodes" / t / f"{address},{port},-1"
            d.mkdir(parents=True, exist_ok=True)
            (d / "default").write_text(RECORD.format(iqn=t))
        if line.startswith("iscsiadm") and "--login" in line:
            if self.refuse:
                self.calls.append([str(a) for a in argv])
                from provision_agent.errors import CommandError
                # as open-iscsi 2.1.8 said it in e2e-iscsi to tgt refusing the CHAP secret
                raise CommandError(list(argv), 24, "", (
                    f"iscsiadm: Could not login to [iface: default, target: {argv[4]}, "
                    "portal: 10.0.2.2,3260].\niscsiadm: initiator reported error (24 - iSCSI "
                    "login failed due to authorization failure)\niscsiadm: Could not log into "
                    "all portals\n"))
            if not self.no_lun:
                t = argv[argv.index("-T") + 1]
                link = self.dev / f"dev/disk/by-path/ip-10.0.2.2:3260-iscsi-{t}-lun-1"
                link.parent.mkdir(parents=True, exist_ok=True)
                link.write_text("")
        return super().run(argv, check=check, timeout=timeout, input=input, ok_codes=ok_codes)


@pytest.fixture
def where(tmp_path, monkeypatch):
    monkeypatch.setattr(iscsi, "DEV", str(tmp_path / "dev-root"))
    monkeypatch.setattr(iscsi, "LOCK_DIR", str(tmp_path / "run-lock-iscsi"))
    return tmp_path / "etc-iscsi", tmp_path / "dev-root"


class Layout:
    def __init__(self, *targets):
        self.disks = [type("D", (), {"id": f"d{i}", "iscsi": t})() for i, t in enumerate(targets)]


def test_login_keeps_the_secrets_out_of_argv_and_the_log(where, caplog):
    etc, dev = where
    runner = Initiator(etc, dev)
    with caplog.at_level(logging.DEBUG):
        links = iscsi.log_in_all(runner, Layout(lun()), str(etc))
    assert links == {"d0": f"/dev/disk/by-path/ip-10.0.2.2:3260-iscsi-{IQN}-lun-1"}
    lines = runner.lines()
    assert "modprobe iscsi_tcp" in lines and "iscsid" in lines
    assert f"iscsiadm -m node -T {IQN} -p 10.0.2.2:3260 -o new" in lines
    assert f"iscsiadm -m node -T {IQN} -p 10.0.2.2:3260 --login" in lines
    record = etc / "nodes" / IQN / "10.0.2.2,3260,-1" / "default"
    text = record.read_text()
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert "node.session.auth.authmethod = CHAP" in text
    assert f"node.session.auth.password = {SECRET}" in text
    assert f"node.session.auth.password_in = {MUTUAL}" in text
    assert text.count("node.session.auth.authmethod") == 1 and "= None" not in text
    assert (etc / "initiatorname.iscsi").read_text() == \
        "InitiatorName=iqn.2004-10.com.ubuntu:01:ab\n"
    for shown in lines + [caplog.text]:
        assert SECRET not in shown and MUTUAL not in shown


def test_iscsid_starts_with_the_initiator_name_written(where):
    """iscsid reads initiatorname.iscsi once, as it starts: started before the name was
    written, it logged in with none and the target refused every login, the right CHAP secret
    too (`tox -e e2e-iscsi`'s first run, 2026-11-29: iscsiadm exit 5, login failure)."""
    etc, dev = where
    seen = []

    class Daemon(Initiator):
        def run(self, argv, **kw):
            if list(argv) == ["iscsid"]:
                seen.append(iscsi.read_initiator(str(etc)))
            return super().run(argv, **kw)

    iscsi.log_in_all(Daemon(etc, dev), Layout(lun()), str(etc))
    assert seen == ["iqn.2004-10.com.ubuntu:01:ab"]


def test_the_layouts_initiator_name_is_used(where):
    etc, dev = where
    runner = Initiator(etc, dev)
    iscsi.log_in_all(runner, Layout(lun(initiator="iqn.2026-11.example:node7")), str(etc))
    assert "iscsi-iname" not in runner.lines()
    assert iscsi.read_initiator(str(etc)) == "iqn.2026-11.example:node7"


def test_a_refused_login_is_exit_3_naming_target_and_portal_without_the_secret(where):
    etc, dev = where
    with pytest.raises(MachineMismatch) as err:
        iscsi.log_in_all(Initiator(etc, dev, refuse=True), Layout(lun()), str(etc))
    text = str(err.value)
    assert err.value.exit_code == EXIT_MACHINE_MISMATCH == 3
    # iscsiadm's reason, not its last line ("Could not log into all portals")
    assert f"iSCSI target {IQN} at 10.0.2.2:3260: cannot log in: iscsiadm: initiator " \
           "reported error (24 - iSCSI login failed due to authorization failure); check " \
           "the portal" in text
    assert SECRET not in text and MUTUAL not in text


def test_a_lun_that_does_not_appear_is_exit_3(where, monkeypatch):
    etc, dev = where
    monkeypatch.setattr(iscsi, "APPEAR_TIMEOUT", 0)
    monkeypatch.setattr(iscsi.time, "sleep", lambda s: None)
    with pytest.raises(MachineMismatch) as err:
        iscsi.login(Initiator(etc, dev, no_lun=True), lun(), str(etc), timeout=0)
    assert "logged in, but LUN 1 did not appear" in str(err.value)


def test_without_chap_the_record_says_none(where):
    etc, dev = where
    iscsi.log_in_all(Initiator(etc, dev), Layout(lun(chap_username=None, chap_password=None,
                                                     mutual_username=None,
                                                     mutual_password=None)), str(etc))
    text = (etc / "nodes" / IQN / "10.0.2.2,3260,-1" / "default").read_text()
    assert "node.session.auth.authmethod = None" in text and "password" not in text


def image(tmp_path, *paths):
    root = tmp_path / "target"
    for p in paths:
        (root / p.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / p.lstrip("/")).write_text("")
    return root


def entry(t):
    return names.entry(t)


def test_the_installed_system_logs_in_at_boot_and_its_initramfs_for_root(where, tmp_path):
    etc, dev = where
    iscsi.log_in_all(Initiator(etc, dev), Layout(lun()), str(etc))
    root = image(tmp_path, "/usr/sbin/iscsiadm", "/usr/share/initramfs-tools/hooks/iscsi")
    args = {"initiator": None, "targets": [entry(lun())], "root": entry(lun())}
    written = iscsi.install(str(root), args, str(etc))
    record = root / "etc/iscsi/nodes" / IQN / "10.0.2.2,3260,-1" / "default"
    assert written == ["/etc/iscsi/initiatorname.iscsi",
                       f"/etc/iscsi/nodes/{IQN}/10.0.2.2,3260,-1/default",
                       "/etc/iscsi/iscsi.initramfs"]
    text = record.read_text()
    assert "node.startup = automatic" in text and "node.conn[0].startup = automatic" in text
    assert "node.startup = manual" not in text and f"password = {SECRET}" in text
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert (root / "etc/iscsi/initiatorname.iscsi").read_text() == \
        "InitiatorName=iqn.2004-10.com.ubuntu:01:ab\n"
    conf = root / "etc/iscsi/iscsi.initramfs"
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600
    assert conf.read_text().splitlines()[1:] == [
        "ISCSI_INITIATOR=iqn.2004-10.com.ubuntu:01:ab", f"ISCSI_TARGET_NAME={IQN}",
        "ISCSI_TARGET_IP=10.0.2.2", "ISCSI_TARGET_PORT=3260", "ISCSI_USERNAME=node1",
        f"ISCSI_PASSWORD={SECRET}", "ISCSI_IN_USERNAME=tgt", f"ISCSI_IN_PASSWORD={MUTUAL}"]


def test_a_secret_with_shell_characters_is_quoted_for_the_initramfs():
    record = "node.session.auth.authmethod = CHAP\nnode.session.auth.username = u\n" \
             "node.session.auth.password = it's $x\n"
    text = iscsi.initramfs_conf(entry(lun()), "iqn.2026-11.x:y", record)
    assert "ISCSI_PASSWORD='it'\"'\"'s $x'" in text


@pytest.mark.parametrize("paths, root_on_it, why", [
    ((), False, "no open-iscsi (iscsiadm)"),
    (("/usr/sbin/iscsiadm",), True, "no open-iscsi (iscsiadm and its initramfs hook)"),
])
def test_an_image_without_open_iscsi_is_exit_5(where, tmp_path, paths, root_on_it, why):
    etc, dev = where
    root = image(tmp_path, *paths)
    args = {"initiator": "iqn.2026-11.x:y", "targets": [entry(lun())],
            "root": entry(lun()) if root_on_it else None}
    with pytest.raises(ImageError) as err:
        iscsi.install(str(root), args, str(etc))
    assert err.value.exit_code == EXIT_IMAGE_ERROR and why in str(err.value)
    assert not os.path.exists(root / "etc/iscsi")


def test_an_image_with_open_iscsi_but_root_elsewhere_needs_no_hook(where, tmp_path):
    etc, dev = where
    iscsi.log_in_all(Initiator(etc, dev), Layout(lun()), str(etc))
    root = image(tmp_path, "/sbin/iscsiadm")
    args = {"initiator": "iqn.2026-11.x:y", "targets": [entry(lun())], "root": None}
    assert "/etc/iscsi/iscsi.initramfs" not in iscsi.install(str(root), args, str(etc))
