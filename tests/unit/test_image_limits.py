"""The image benchmark's limit (benchmarks/image_limits.limit): on few cores the stages' CPU
work, not the slowest stage, is what ours cannot beat. Figures only, no clock."""

from benchmarks import image_limits


def test_the_slowest_stage_bounds_when_the_work_fits_on_the_cores():
    lim = image_limits.limit({"decompress": 0.9, "download": 0.5, "write": 0.6},
                             {"decompress": 0.9, "download": 0.3, "write": 0.2, "sha256": 0.1},
                             cores=2)
    assert lim.bound == "slowest stage" and lim.slowest == "decompress"
    assert lim.seconds == 0.9 and round(lim.cpu_seconds, 6) == 1.5


def test_the_cpu_over_the_cores_bounds_when_it_takes_longer():
    lim = image_limits.limit({"decompress": 0.9, "download": 0.9, "write": 0.5},
                             {"decompress": 0.9, "download": 0.8, "write": 0.3, "sha256": 0.2},
                             cores=2)
    assert lim.bound == "CPU / cores" and round(lim.seconds, 6) == 1.1
    assert lim.slowest_seconds == 0.9      # the old figure stays beside the new one


def test_sha256_adds_cpu_but_is_never_the_slowest_stage():
    lim = image_limits.limit({"download": 0.8, "write": 0.5, "sha256": 1.0},
                             {"download": 0.6, "write": 0.2, "sha256": 0.9}, cores=4)
    assert lim.slowest == "download" and lim.seconds == 0.8
    assert round(lim.cpu_seconds, 6) == 1.7


def test_one_core_is_the_sum_of_the_cpu_and_a_tie_goes_to_the_stage():
    assert image_limits.limit({"write": 1.0}, {"write": 1.0}, cores=1).bound == "slowest stage"
    lim = image_limits.limit({"write": 1.0}, {"write": 0.7, "sha256": 0.6}, cores=1)
    assert lim.bound == "CPU / cores" and round(lim.seconds, 6) == 1.3


def test_kernel_seconds_count_a_thread_born_in_between_from_zero():
    before = {(10, 5): 1.0, (11, 7): 2.0}
    after = {(10, 5): 1.25, (11, 7): 2.0, (12, 9): 0.5}
    assert image_limits.kernel_seconds(before, after) == 0.75


def test_each_round_is_held_to_its_own_limit():
    """image_write's per-round ratios: a round's limit over that round's ours, so that a slow
    minute slows both sides of its ratio."""
    from benchmarks import image_write

    zero = {"decompress": [0.0, 0.0], "download": [0.0, 0.0], "write": [0.0, 0.0],
            "sha256": [0.0, 0.0]}
    row = {"ours": [1.0, 2.0],
           "limit": {"time": {"decompress": [0.9, 1.6], "download": [0.1, 0.2],
                              "write": [0.5, 1.0], "sha256": [0.1, 0.2]},
                     "cpu": {"decompress": [0.9, 1.6], "download": [0.1, 0.2],
                             "write": [0.3, 0.6], "sha256": [0.1, 0.2]},
                     "server": zero, "kernel": zero}}
    assert image_write.round_ratios(row, cores=2) == "0.90 0.80, median 0.85x"
