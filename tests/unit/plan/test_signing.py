"""The signature policy at plan time: what validate and a dry run refuse (exit 2, located),
and what the plan shows of a signature (never its armour, never a URL's credentials)."""

import json

import pytest

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.errors import InputError
from provision_agent.plan import inventory, pipeline
from tests.unit.helpers import SAMPLES, mutate, run_cli, sample

ARMOUR = "-----BEGIN PGP SIGNATURE-----\n\niHUEABYKAB0WIQRkK1xGafA2\n-----END PGP SIGNATURE-----\n"
SIG_URL = "https://user:pw@images.example/root.tar.zst.sig?temp_url_sig=abc"


def uefi_with(**image):
    return mutate(sample("uefi"), lambda d: d["images"][0].update(image))


def plan(doc, keyring):
    disks = inventory.load(str(SAMPLES / "inventory" / "single-disk.json"))
    return pipeline.build_plan(NativeDriver(doc).layout(), disks, keyring=keyring)


def image_step(planned):
    return next(s for s in planned.steps if s.kind == "write_image")


@pytest.mark.parametrize("image,keyring,message", [
    ({}, True, "no signature: a keyring is configured (--image_keyring), so unsigned images "
               "are refused; give signature, or set allow_unsigned to write it unverified"),
    ({"signature": ARMOUR}, False, "a signature is given, but no keyring is configured to "
                                   "verify it against (--image_keyring)"),
])
def test_what_the_policy_refuses_is_named_with_its_place(image, keyring, message):
    with pytest.raises(InputError) as caught:
        plan(uefi_with(**image), keyring)
    assert [str(p) for p in caught.value.problems] == [f"$.images[0]: {message}"]
    with pytest.raises(InputError):     # the conductor's check, without a machine
        pipeline.check_layout(NativeDriver(uefi_with(**image)).layout(), keyring=keyring)


@pytest.mark.parametrize("image,keyring,args", [
    ({}, False, {}),
    ({"allow_unsigned": True}, True, {"allow_unsigned": True}),
    ({"signature": ARMOUR}, True, {"signature": ARMOUR}),
    ({"signature": SIG_URL, "allow_unsigned": True}, True,
     {"signature": SIG_URL, "allow_unsigned": True}),
])
def test_what_the_policy_lets_through_reaches_the_step(image, keyring, args):
    step = image_step(plan(uefi_with(**image), keyring))
    assert {k: v for k, v in step.args.items() if k in ("signature", "allow_unsigned")} == args
    assert ("signature verified" in step.description) == ("signature" in image)


def test_a_signature_that_is_neither_url_nor_armour_is_refused_without_echo():
    doc = uefi_with(signature="c2VjcmV0IHNpZ25hdHVyZQ==")
    with pytest.raises(InputError) as caught:
        NativeDriver(doc).layout()
    assert "$.images[0].signature" in str(caught.value)
    assert "c2VjcmV0" not in str(caught.value)


@pytest.mark.parametrize("given,shown", [
    (ARMOUR, "<redacted>"),
    (SIG_URL, "https://images.example/root.tar.zst.sig?…"),
])
def test_the_json_plan_shows_no_armour_and_no_credentials(tmp_path, given, shown):
    keyring = tmp_path / "keyring.pgp"
    keyring.write_bytes(b"")
    rc, out, err = run_cli(tmp_path, uefi_with(signature=given), "single-disk",
                           extra=["--plan_format", "json", "--image_keyring", str(keyring)])
    assert rc == 0, err
    doc = json.loads(out)
    step = next(s for s in doc["steps"] if s["kind"] == "write_image")
    assert step["args"]["signature"] == shown
    assert "iHUEABYKAB0" not in out and "pw@" not in out and "temp_url_sig" not in out


def test_the_cli_refuses_an_unsigned_image_under_a_keyring_with_exit_2(tmp_path):
    rc, out, err = run_cli(tmp_path, sample("uefi"), "single-disk",
                           extra=["--image_keyring", str(tmp_path / "keyring.pgp")])
    assert rc == 2 and out == ""
    assert "$.images[0]: no signature: a keyring is configured" in err
    rc, _, err = run_cli(tmp_path, sample("uefi"), "single-disk")
    assert rc == 0, err
