"""OpenPGP keys for the signed-image tests, made with gpg in a temporary GNUPGHOME.

keys.keyring: the certificate of the signing key, as gpg --export writes it (what an operator
gives --image_keyring); keys.sign(path): an armoured detached signature of that file;
keys.stranger_sign(path): the same by a key the keyring does not hold. Without gpg, its agent
or sqv the tests skip locally and fail in CI (CI=true), where a skip must never count as a pass.
"""

import os
import shutil
import subprocess

import pytest

TOOLS = ("gpg", "gpg-agent", "gpgconf", "sqv")


def require():
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing and os.environ.get("CI") == "true":
        raise RuntimeError(f"signed-image tests cannot run: missing tools {missing}")
    return pytest.mark.skipif(bool(missing), reason=f"missing tools {missing}")


class Keys:
    def __init__(self, where):
        self.where = where
        self.home = {}
        for who in ("signer", "stranger"):
            home = os.path.join(where, who)
            os.mkdir(home, 0o700)
            self.home[who] = home
            self._gpg(who, "--passphrase", "", "--quick-gen-key",
                      f"Image {who} <{who}@provision.invalid>", "ed25519", "sign", "never")
        self.keyring = os.path.join(where, "keyring.pgp")
        with open(self.keyring, "wb") as f:
            f.write(self._gpg("signer", "--export"))

    def _gpg(self, who, *args):
        env = dict(os.environ, GNUPGHOME=self.home[who])
        return subprocess.run(["gpg", "--batch", "--quiet", *args], env=env,
                              capture_output=True, check=True).stdout

    def sign(self, path, who="signer"):
        return self._gpg(who, "--armor", "--detach-sign", "-o", "-", str(path)).decode()

    def stranger_sign(self, path):
        return self.sign(path, "stranger")

    def close(self):
        for home in self.home.values():
            subprocess.run(["gpgconf", "--kill", "gpg-agent"], capture_output=True,
                           env=dict(os.environ, GNUPGHOME=home))


@pytest.fixture(scope="session")
def signing_keys(tmp_path_factory):
    # a short path: gpg-agent's socket lives in GNUPGHOME and socket paths are short
    keys = Keys(str(tmp_path_factory.mktemp("gpg")))
    yield keys
    keys.close()
