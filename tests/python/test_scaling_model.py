"""bench/scaling_model.py: Gloo's allreduce phases, the event simulation of one step, the bucket plan and the
reading of bench/notes/multihost.md's tables (stdlib only; no lockstep build needed)."""

import argparse
import importlib.util
import math
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("scaling_model", os.path.join(REPO, "bench", "scaling_model.py"))
sm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sm)


def test_phases_take_the_latency_steps_measured_per_algorithm():
    # bench/notes/multihost.md: 4 KB allreduces over a delayed loopback wait 2(N-1), 4N-3 and 2 log2(P) + 2 latencies
    rounds = lambda algorithm, n: sum(steps + overlapped for steps, overlapped, _ in sm.phases(algorithm, n))
    assert [rounds("ring", n) for n in (2, 3, 4)] == [2, 4, 6]
    assert [rounds("ring_chunked", n) for n in (2, 3, 4)] == [5, 9, 13]
    assert [rounds("halving_doubling", n) for n in (2, 3, 4)] == [4, 4, 6]
    assert rounds("bcube", 4) == 6
    assert sm.phases("ring", 1) == []


def test_phases_send_gloos_buffers_per_shard():
    assert sm.phases("ring", 4) == [(6, 0, {"all": (4, 3)})]
    assert sm.phases("ring_chunked", 4) == [(6, 7, {"all": (4, 1.5)})]
    assert sm.phases("halving_doubling", 4) == [(6, 0, {"all": (4, 1.5)})]
    # 3 shards: binary blocks of 2 and 1; the lone shard sends its whole buffer into the pair, which sends
    # the reduced halves back while it allgathers
    assert sm.phases("halving_doubling", 3) == [(2, 0, {"large": (2, 0.5), "small": (1, 1.0)}),
                                               (2, 0, {"large": (2, 1.0)}),
                                               (0, 0, {"small": (1, 0.0)})]


def test_phases_reject_what_gloo_does_not_run_as_modelled():
    with pytest.raises(ValueError, match="bcube on 3 shards"):
        sm.phases("bcube", 3)
    with pytest.raises(ValueError, match="halving_doubling on 7 shards"):
        sm.phases("halving_doubling", 7)  # a block of 3 is not binary


def one_call(latency, transfer, link="link", cap=1.0):
    return ([(latency, 0.0, {link: transfer})], cap)


def simulate(calls, ready, updates=None, backward_end=0.1, channels=1, overlap=0.0):
    return sm.simulate(ready, backward_end, updates or [0.0] * len(calls), calls, channels, overlap)


def test_a_call_within_the_backward_is_hidden():
    r = simulate([one_call(0.002, 0.03)], ready=[0.05], updates=[0.01])
    assert r["step"] == pytest.approx(0.11)  # backward, then the bucket's update
    assert r["exposed"] == pytest.approx(0.0)
    assert r["busy"] == pytest.approx(0.032)
    assert r["backward_wall"] == pytest.approx(0.1)


def test_a_call_past_the_backward_is_exposed_until_its_update_can_run():
    r = simulate([one_call(0.002, 0.03)], ready=[0.09], updates=[0.01])
    assert r["step"] == pytest.approx(0.09 + 0.032 + 0.01)
    assert r["exposed"] == pytest.approx(0.022)


def test_updates_run_as_their_sums_come_in():
    # bucket 0's update fills the wait for bucket 1's allreduce
    calls = [one_call(0.0, 0.01), one_call(0.0, 0.02)]
    r = simulate(calls, ready=[0.05, 0.1], updates=[0.015, 0.005], channels=2)
    assert r["step"] == pytest.approx(0.1 + 0.02 + 0.005)
    assert r["exposed"] == pytest.approx(0.005)


def test_calls_on_one_channel_run_in_order_and_on_two_share_the_link():
    calls = [one_call(0.0, 0.01), one_call(0.0, 0.01)]
    one = simulate(calls, ready=[0.0, 0.0], backward_end=0.05)
    two = simulate(calls, ready=[0.0, 0.0], backward_end=0.05, channels=2)
    assert one["in_flight"] == pytest.approx(0.02) and one["busy"] == pytest.approx(0.02)
    assert two["in_flight"] == pytest.approx(0.02) and two["busy"] == pytest.approx(0.04)  # both end at 0.02


def test_a_capped_call_leaves_the_rest_of_the_link_to_the_others():
    calls = [one_call(0.0, 0.01, cap=0.25), one_call(0.0, 0.03)]
    r = simulate(calls, ready=[0.0, 0.0], channels=2)
    # the capped call runs at 1/4 for 0.04 s while the other takes 3/4 (0.03 s of work by 0.04)
    assert r["busy"] == pytest.approx(0.04 + 0.04)


def test_compute_slows_while_a_call_transfers_but_not_while_it_waits_out_latency():
    r = simulate([one_call(0.05, 0.01)], ready=[0.0], overlap=1.0)
    # 0.05 s of latency at full speed, 0.01 s of transfer at half speed, then the remaining 0.045 s
    assert r["backward_wall"] == pytest.approx(0.05 + 0.01 + 0.045)
    lined_up = simulate([([(0.0, 0.05, {})], 1.0)], ready=[0.0], overlap=1.0)
    assert lined_up["backward_wall"] == pytest.approx(0.05 + 0.075)  # lining up slows it throughout


def test_a_phase_lasts_at_least_its_overlapped_latency():
    r = simulate([([(0.001, 0.004, {"l": 0.002})], 1.0)], ready=[0.0], backward_end=0.0)
    assert r["busy"] == pytest.approx(0.005)


SHAPES = {"w1": [16], "b1": [1], "w2": [64], "b2": [2]}  # 64, 4, 256 and 8 bytes


def test_buckets_close_at_the_bucket_size_in_reduce_order():
    buckets = sm.plan_buckets(["w1", "b1", "w2", "b2"], SHAPES, bucket_bytes=300)
    assert buckets == [(64 + 256, ["b2", "w2"]), (64 + 64, ["b1", "w1"])]  # slices take whole 64-byte lines


def test_the_tail_bucket_takes_the_first_created_parameters():
    buckets = sm.plan_buckets(["w1", "b1", "w2", "b2"], SHAPES, bucket_bytes=1 << 20, tail_bytes=60)
    assert buckets == [(64 + 256 + 64, ["b2", "w2", "b1"]), (64, ["w1"])]


def test_the_plan_is_parallelizes_own():
    from lockstep import brew, data_parallel_model, model_helper, optimizer

    def forward(model, loss_scale):
        hidden = brew.fc(model, "data", "fc1", 6, 40)
        logits = brew.fc(model, hidden, "fc2", 40, 3)
        _, loss = brew.softmax_with_loss(model, [logits, "label"], ["softmax", "loss"])
        return [brew.scale(model, loss, "scaled_loss", scale=loss_scale)]

    model = model_helper.ModelHelper(name="two_fc")
    parallel = data_parallel_model.Parallelize_CPU(
        model, input_builder_fun=lambda m: None, forward_pass_builder_fun=forward,
        param_update_builder_fun=lambda m: optimizer.build_sgd(m, base_learning_rate=0.1), devices=[0, 1],
        bucket_bytes=600, tail_bucket_bytes=100)
    shapes = {"fc1_w": [40, 6], "fc1_b": [40], "fc2_w": [3, 40], "fc2_b": [3]}
    planned = sm.plan_buckets(["fc1_w", "fc1_b", "fc2_w", "fc2_b"], shapes, 600, 100)
    assert [names for _, names in planned] == [["fc2_b", "fc2_w", "fc1_b"], ["fc1_w"]] == parallel.buckets


def test_updates_are_split_by_bucket_bytes():
    assert sm.updates_by_bytes(0.01, [(300, []), (100, [])]) == pytest.approx([0.0075, 0.0025])


def test_expected_max_of_normals():
    assert sm.expected_max_normal(1) == pytest.approx(0.0, abs=1e-6)
    assert sm.expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), abs=1e-4)
    assert sm.expected_max_normal(256) == pytest.approx(2.83, abs=0.01)


def test_the_line_up_is_a_wait_for_the_latest_of_n_shards():
    assert sm.lineup(2) == pytest.approx(1.0)
    assert sm.lineup(3) == pytest.approx(0.8463 / 0.5642, abs=1e-3)
    assert sm.lineup(4) == pytest.approx(1.0294 / 0.5642, abs=1e-3)
    # 4 shards: the first call waits 1.82 line-ups of 2 shards before its 20 ms of transfers
    assert predict(1, 0, 0, sync_s=0.01) - predict(1, 0, 0) == pytest.approx(0.01 * sm.lineup(4))


def test_read_table_averages_invocations_and_fills_missing_columns(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("""# x

## Shards over shaped links: `multihost/run.sh`

| shards | Gbit/s | algorithm | bucket MiB | tail MiB | channels | step s | allreduce s/step | hidden |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
| 2 | 1 | ring | 8 | 1 | 2 | 0.4 / 0.6 | 0.3 / 0.5 | 10% / 20% |

| shards | Gbit/s | latency ms | algorithm | wire | step s | allreduce s/step | delay.py CPU s/step |
| --- | --- | --- | --- | --- | --- | --- | --- |
| 4 | 10 | 0.1 | bcube | bfloat16 | 0.3 / 0.3 / 0.6 | 0.2 | 0.1 / 0.3 |

## Next section

| shards | Gbit/s | algorithm | step s | allreduce s/step |
| --- | --- | --- | --- | --- |
| 9 | 9 | ring | 9 | 9 |
""")
    rows = sm.read_table(str(readme))
    assert rows == [
        {"shards": 2, "gbit": 1.0, "latency": 0.0, "algorithm": "ring", "bucket": 8.0, "tail": 1.0, "channels": 2,
         "wire": "float", "step": pytest.approx(0.5), "allreduce": pytest.approx(0.4), "delay_cpu": 0.0},
        {"shards": 4, "gbit": 10.0, "latency": 0.1, "algorithm": "bcube", "bucket": 8.0, "tail": 0.0,
         "channels": 1, "wire": "bfloat16", "step": pytest.approx(0.4), "allreduce": pytest.approx(0.2),
         "delay_cpu": pytest.approx(0.2)},
    ]


def test_read_table_reads_a_page_whose_title_is_the_section(tmp_path):
    page = tmp_path / "multihost.md"
    page.write_text("""# Shards over shaped links: `multihost/run.sh`

## With latency

| shards | Gbit/s | algorithm | step s | allreduce s/step |
| --- | --- | --- | --- | --- |
| 2 | 1 | ring | 0.4 | 0.3 |
""")
    assert [row["step"] for row in sm.read_table(str(page))] == [pytest.approx(0.4)]


def test_the_calibration_tables_are_where_the_model_looks_by_default():
    rows = sm.read_table(os.path.join(REPO, "bench", "notes", "multihost.md"))
    assert len(rows) >= 132 and {row["shards"] for row in rows} == {2, 3, 4}


def predict(gbit, latency_ms, peer_s, algorithm="ring_chunked", wire="float", wire_ns=(0.0, 0.0, 0.0), sync_s=0.0):
    """Step time of 4 shards on one bucket of SHAPES whose allreduce transfers take 20 ms on a shaped link."""
    prof = {"params": ["w1", "b1", "w2", "b2"], "grad_ready": {"w1": 0.1, "b1": 0.1, "w2": 0.05, "b2": 0.05},
            "backward_end": 0.1, "update_s": 0.0}
    args = argparse.Namespace(contention=True, cpu_link_gbit=10, delay_extra_ms=0.0, delay_cpu_share=0.0,
                              wire_ns=wire_ns)
    (bucket_bytes, _), = sm.plan_buckets(prof["params"], SHAPES, 8 << 20)
    bw = 1.5 * bucket_bytes / 0.02
    theta = {("bw", 1.0): bw, ("bw", 10.0): bw, "sync_s": sync_s, "idle": 0.0, "overlap": 0.0, "peer_s": peer_s}
    row = {"shards": 4, "gbit": gbit, "latency": latency_ms, "algorithm": algorithm, "bucket": 8, "tail": 0,
           "channels": 1, "wire": wire, "delay_cpu": 0.0}
    return sm.predict_row(row, theta, prof, SHAPES, args)[0]


def test_a_16_bit_wire_halves_the_transfers():
    # no latency, no peer wait: after the backward (0.2 s: 4 shards on 2 cores) the transfers take 20 ms, then 10
    for wire in ("bfloat16", "float16"):
        assert predict(1, 0, 0) == pytest.approx(0.22)
        assert predict(1, 0, 0, wire=wire) == pytest.approx(0.21)


def test_a_16_bit_wire_first_spends_the_conversions_cpu_time():
    # per value: narrow + widen + (N-1)/N of an add, on cores the 4 shards share 2 to 1
    (bucket_bytes, _), = sm.plan_buckets(["w1", "b1", "w2", "b2"], SHAPES, 8 << 20)
    narrow, add, widen = 1e5, 2e5, 1e5
    convert = 2 * (bucket_bytes / 4) * (narrow + widen + add * 3 / 4) * 1e-9
    assert predict(1, 0, 0, wire="bfloat16", wire_ns=(narrow, add, widen)) == pytest.approx(0.21 + convert)
    assert predict(1, 0, 0, wire="float", wire_ns=(narrow, add, widen)) == pytest.approx(0.22)


def test_without_wire_ns_each_16_bit_dtype_has_its_measured_cost():
    assert predict(1, 0, 0, wire="bfloat16", wire_ns=None) > predict(1, 0, 0, wire="bfloat16")
    assert predict(1, 0, 0, wire="float16", wire_ns=None) > predict(1, 0, 0, wire="bfloat16", wire_ns=None)


def test_ring_chunked_hides_its_notification_rounds_only_where_the_network_limits_the_link():
    # 13 rounds: 6 in series, 7 behind the 20 ms of transfers on a shaped link; all in series on the cores
    assert predict(1, 1, 0) - predict(1, 0, 0) == pytest.approx(0.006)
    assert predict(10, 1, 0) - predict(10, 0, 0) == pytest.approx(0.013)


def test_a_round_waits_for_a_descheduled_peer_where_the_cores_limit_the_link():
    # 4 shards on 2 cores: each of the 13 rounds lasts at least peer_s * (4/2 - 1)
    assert predict(10, 0, 0.001) - predict(10, 0, 0) == pytest.approx(0.013)
    assert predict(10, 1, 0.0005) - predict(10, 0, 0) == pytest.approx(0.013)  # the latency is the longer
    assert predict(1, 0, 0.001) == pytest.approx(predict(1, 0, 0))


RUN_OUTPUT = """note: this kernel has no netem qdisc: links are shaped with tbf, latency is added by delay.py
shards Gbit/s   latency_ms  algorithm        bucket_mb tail_mb channels step_s     allreduce_s    hidden   delay_cpu_s
2      10       0           ring_chunked     8         1       2        {step}      0.123          91%      n/a
3      1        0.5         halving_doubling 2         0.5     4        0.800      2.400          20%      {cpu}
load after: 0.1 0.2 0.3
"""


def test_read_runs_averages_the_invocations_of_run_sh(tmp_path):
    first, second = tmp_path / "1.txt", tmp_path / "2.txt"
    first.write_text(RUN_OUTPUT.format(step="0.140", cpu="0.2000"))
    second.write_text(RUN_OUTPUT.format(step="0.160", cpu="0.3000"))
    rows = sm.read_runs([str(first), str(second)])
    assert rows == [
        {"shards": 2, "gbit": 10.0, "latency": 0.0, "algorithm": "ring_chunked", "bucket": 8.0, "tail": 1.0,
         "channels": 2, "wire": "float", "step": pytest.approx(0.15), "allreduce": pytest.approx(0.123),
         "delay_cpu": 0.0},
        {"shards": 3, "gbit": 1.0, "latency": 0.5, "algorithm": "halving_doubling", "bucket": 2.0, "tail": 0.5,
         "channels": 4, "wire": "float", "step": pytest.approx(0.8), "allreduce": pytest.approx(2.4),
         "delay_cpu": pytest.approx(0.25)},
    ]


WIRE_OUTPUT = """shards Gbit/s   latency_ms  algorithm        bucket_mb tail_mb channels wire      step_s     allreduce_s    hidden   delay_cpu_s
2      1        0           halving_doubling 8         1       2        float     {step}      0.700          20%      n/a
2      1        0           halving_doubling 8         1       2        bfloat16  0.250      0.350          30%      n/a
"""


def test_read_runs_reads_the_wire_column(tmp_path):
    first, second = tmp_path / "1.txt", tmp_path / "2.txt"
    first.write_text(WIRE_OUTPUT.format(step="0.440"))
    second.write_text(WIRE_OUTPUT.format(step="0.460"))
    rows = sm.read_runs([str(first), str(second)])
    assert [(r["wire"], r["step"]) for r in rows] == [("float", pytest.approx(0.45)), ("bfloat16", 0.25)]


def test_read_runs_refuses_invocations_of_different_sweeps(tmp_path):
    first, other, empty = tmp_path / "1.txt", tmp_path / "2.txt", tmp_path / "3.txt"
    first.write_text(RUN_OUTPUT.format(step="0.140", cpu="0.2000"))
    other.write_text(RUN_OUTPUT.format(step="0.140", cpu="0.2000").replace("ring_chunked    ", "ring            "))
    empty.write_text("load after: 0.1 0.2 0.3\n")
    with pytest.raises(ValueError, match="different configurations"):
        sm.read_runs([str(first), str(other)])
    with pytest.raises(ValueError, match="3.txt: no rows"):
        sm.read_runs([str(first), str(empty)])
