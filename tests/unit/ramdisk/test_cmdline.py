"""The ramdisk's console never shows the agent token: a virtual-media
boot carries `ipa-agent-token=` on the kernel command line, which /init printed whole. The
printing goes through ramdisk/cmdline.sh, run here with sh as /init sources it."""

import re
import subprocess

import pytest

from tests.unit.helpers import REPO

RAMDISK = REPO / "ramdisk"
LINE = ('BOOT_IMAGE=/vmlinuz console=ttyS0 ipa-agent-token=TOKEN9f3b sshkey=c3NoLWVkMjU1MTk= '
        'ipa-api-url=https://admin:PASSWORD@ironic.example:6385/v1?temp_url_sig=SIG '
        'acpi_osi="!Windows 2015" * provision.debug')
SHOWN = ('BOOT_IMAGE=/vmlinuz console=ttyS0 ipa-agent-token=<redacted> '
         'sshkey=c3NoLWVkMjU1MTk= ipa-api-url=https://ironic.example:6385/v1?<redacted> '
         'acpi_osi="!Windows 2015" * provision.debug')


def _sh(script, *args):
    return subprocess.run(["sh", "-c", script, "sh", *args], capture_output=True, text=True,
                          check=True, cwd=RAMDISK).stdout


def test_inits_own_line_shows_the_command_line_without_the_token():
    """The line of /init that prints the command line, run as it is, with `say` writing to
    stdout instead of /dev/console."""
    init = (RAMDISK / "init").read_text()
    lines = [ln for ln in init.splitlines() if ln.startswith("say ") and "cmdline" in ln]
    assert len(lines) == 1, lines
    out = _sh('say() { echo "$*"; }; uname() { echo 6.1.0; }; . ./cmdline.sh; cmdline=$1; '
              + lines[0], LINE)
    assert out == f"kernel 6.1.0; cmdline: {SHOWN}\n"
    assert not re.search("TOKEN9f3b|PASSWORD|admin|SIG", out)


@pytest.mark.parametrize("word,shown", [
    ("ipa-agent-token=abc", "ipa-agent-token=<redacted>"),
    ('ipa-agent-token="abc def"', "ipa-agent-token=<redacted>"),
    ("root_password=x", "root_password=<redacted>"),
    ("X_SECRET=x", "X_SECRET=<redacted>"),
    ("url=ftp://u:p@h@host/p", "url=ftp://host/p"),
    ("sshkey=c3NoLXJzYQ==", "sshkey=c3NoLXJzYQ=="),
    ("ipa-insecure=1", "ipa-insecure=1"),
])
def test_secret_named_values_and_url_credentials_are_replaced(word, shown):
    out = _sh('. ./cmdline.sh; show_cmdline "$1"', f"quiet {word} ro")
    assert out == f"quiet {shown} ro\n"


def test_the_helper_is_installed_where_init_sources_it():
    sourced = re.search(r"^\. (/\S+)$", (RAMDISK / "init").read_text(), re.M).group(1)
    build = (RAMDISK / "build-project.sh").read_text()
    assert f'"$here/cmdline.sh" "$stage{sourced}"' in build
