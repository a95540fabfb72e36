"""The kernel log read since the run started, and the device errors in it."""

from provision_agent.drivers import kernel_log
from tests.unit.fakes import FakeRunner

BOOT = ("<6>[   47.709708]  vda: vda1 vda2\n"
        "<6>[   52.467268] md: resync of RAID array md127\n")
# as the ramdisk's kernel (6.1) logged the blkdebug write error of issue 57
RESYNC_ERROR = ("<3>[   52.636408] I/O error, dev vdb, sector 21888 op 0x1:(WRITE) flags 0x0 "
                "phys_seg 245 prio class 0\n")


def test_parse_levels_times_and_continuations():
    entries = kernel_log.parse(BOOT + RESYNC_ERROR + " continued here\n<14>no time stamp\n")
    assert [e.level for e in entries] == [6, 6, 3, 6]       # facility bits dropped (14 = 8+6)
    assert entries[2].seconds == 52.636408
    assert entries[2].message.endswith("prio class 0 continued here")
    assert entries[3].seconds is None and entries[3].message == "no time stamp"


def test_device_errors_of_every_form():
    text = (RESYNC_ERROR
            + "<3>[ 1.0] blk_update_request: I/O error, dev sda, sector 2048 op 0x1:(WRITE) "
              "flags 0x800 phys_seg 1 prio class 0\n"
            + "<3>[ 2.0] critical medium error, dev nvme0n1, sector 99 op 0x0:(READ) flags 0\n"
            + "<3>[ 3.0] Buffer I/O error on dev vdb1, logical block 5, lost async page write\n"
            + "<2>[ 4.0] md/raid1:md127: Disk failure on vdc2, disabling device.\n"
            + "<6>[ 5.0] md: md127: resync done.\n"
            + "<3>[ 6.0] critical target error, dev sdb, sector 0 op 0x3:(DISCARD) flags 0\n"
            + "<3>[ 7.0] operation not supported error, dev sdb, sector 8 op 0x9:(WRITE_ZEROES)"
              " flags 0\n")
    found = kernel_log.device_errors(kernel_log.parse(text))
    assert [(e.device, e.sector, e.op, e.array) for e in found] == [
        ("vdb", 21888, "WRITE", None), ("sda", 2048, "WRITE", None),
        ("nvme0n1", 99, "READ", None), ("vdb1", None, None, None), ("vdc2", None, None, "md127")]
    assert found[0].line.startswith("I/O error, dev vdb, sector 21888 op 0x1:(WRITE)")


def test_new_returns_only_what_came_after_the_mark():
    runner = FakeRunner({"dmesg --raw": BOOT})
    log = kernel_log.KernelLog(runner)
    assert log.new() == []
    runner.answers["dmesg --raw"] = BOOT + RESYNC_ERROR
    assert [e.message[:22] for e in log.new()] == ["I/O error, dev vdb, se"]
    assert log.new() == []
    # the same error again later (its own time stamp) is new again
    runner.answers["dmesg --raw"] = BOOT + RESYNC_ERROR + RESYNC_ERROR.replace("52.6", "53.6")
    assert [e.seconds for e in log.new()] == [53.636408]


def test_a_wrapped_log_is_read_whole_and_an_unreadable_one_is_said_once(caplog):
    runner = FakeRunner({"dmesg --raw": BOOT})
    log = kernel_log.KernelLog(runner)
    runner.answers["dmesg --raw"] = RESYNC_ERROR           # the mark fell out of the buffer
    assert len(log.new()) == 1
    runner = FakeRunner({"dmesg --raw": (1, "")})
    log = kernel_log.KernelLog(runner)
    assert log.new() == [] and log.new() == []
    assert len(runner.calls) == 1
    assert "the kernel log cannot be read" in caplog.text
