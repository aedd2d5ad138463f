"""The orrery Python module against the orrery executable: the same inputs give the same document
as `orrery run --output`, scenarios share their traces, errors carry the CLI's message, threads
run simulations in parallel with results identical to running them alone."""
import concurrent.futures
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy
import pytest

import orrery

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "llama_dp2tp2pp2"
BINARY = os.environ.get("ORRERY_BINARY", str(ROOT / "build" / "orrery"))


def example_scenario(**settings):
    return orrery.Scenario.from_files(workload=str(EXAMPLE / "workload"),
                                      system=str(EXAMPLE / "system.json"),
                                      network=str(EXAMPLE / "network.yml"),
                                      comm_groups=str(EXAMPLE / "workload.json"), **settings)


def without_wall(document):
    doc = json.loads(document)
    doc["summary"]["wall_seconds"] = 0.0
    return doc


def cli_document(tmp_path, *extra):
    out = tmp_path / "result.json"
    subprocess.run([BINARY, "run", "-q", "-w", str(EXAMPLE / "workload"),
                    "-g", str(EXAMPLE / "workload.json"), "-s", str(EXAMPLE / "system.json"),
                    "-n", str(EXAMPLE / "network.yml"), "-o", str(out), *extra],
                   check=True, capture_output=True)
    return out.read_text()


def test_the_bundled_example_gives_the_clis_document_byte_for_byte(tmp_path):
    result = orrery.run(example_scenario())
    cli = cli_document(tmp_path)
    # Identical but for the wall time, which Python reports as 0: same keys, same order, same
    # numbers, the same bytes once wall_seconds agrees.
    assert without_wall(result.to_json()) == without_wall(cli)
    # The CLI's wall time as it wrote it: nlohmann::json's shortest-digits search (Grisu2) is not
    # always the shortest (0.06860292900000001 where Python writes 0.068602929), so its text is
    # taken as it is rather than read and written again.
    wall = re.search(r'"wall_seconds": ([^,\n}]+)', cli).group(1)
    assert result.to_json().replace('"wall_seconds": 0.0', f'"wall_seconds": {wall}') == cli
    assert result.finish_ns == 236212
    assert result.finish_ns == json.loads(cli)["summary"]["simulated_ns"]


def test_ranks_are_numpy_arrays_and_tables_are_lists_of_dicts():
    result = orrery.run(example_scenario())
    assert isinstance(result.ranks["finish_ns"], numpy.ndarray)
    assert result.ranks["rank"].tolist() == list(range(8))
    assert int(result.ranks["finish_ns"].max()) == result.finish_ns
    # ASTRA-sim's exposed communication: finish minus compute, per rank.
    assert (result.ranks["exposed_comm_ns"] ==
            result.ranks["finish_ns"] - result.ranks["compute_ns"]).all()
    assert len(result.collectives) == 96
    assert {"type", "group", "bytes", "duration_ns", "busbw_gbps"} <= set(result.collectives[0])
    assert all(link["bytes"] > 0 for link in result.links)


def test_to_pandas_gives_frames_when_pandas_is_installed():
    pandas = pytest.importorskip("pandas")
    result = orrery.run(example_scenario())
    frame = result.collectives.to_pandas()
    assert isinstance(frame, pandas.DataFrame) and len(frame) == 96
    assert list(result.ranks.to_pandas()["rank"]) == list(range(8))


def test_replace_changes_bandwidth_and_algorithm_and_matches_the_cli(tmp_path):
    base = example_scenario()
    assert base.bandwidth == [200.0, 50.0]
    faster = base.replace(bandwidth=[400, 100])
    assert faster.bandwidth == [400.0, 100.0]
    assert orrery.run(faster).finish_ns < orrery.run(base).finish_ns
    # The same change as a file, through the CLI.
    network = (EXAMPLE / "network.yml").read_text().replace("[ 200.0, 50.0 ]", "[ 400, 100 ]")
    (tmp_path / "net.yml").write_text(network)
    out = tmp_path / "r.json"
    subprocess.run([BINARY, "run", "-q", "-w", str(EXAMPLE / "workload"),
                    "-g", str(EXAMPLE / "workload.json"), "-s", str(EXAMPLE / "system.json"),
                    "-n", str(tmp_path / "net.yml"), "-o", str(out)], check=True,
                   capture_output=True)
    assert json.loads(out.read_text())["summary"]["simulated_ns"] == orrery.run(faster).finish_ns
    # Every collective of this example runs over 2 ranks, where ring, direct and halving-doubling
    # send the same messages; the chunking shows a system change.
    split = base.replace(system={"preferred-dataset-splits": 1})
    assert split.system["preferred-dataset-splits"] == 1
    assert split.system["all-reduce-implementation"] == ["ring", "direct"]
    assert orrery.run(split).finish_ns == 79824
    aware = base.replace(backend="congestion-aware")
    assert without_wall(orrery.run(aware).to_json()) == \
        without_wall(cli_document(tmp_path, "-b", "congestion-aware"))


def test_generators_build_traces_in_memory_that_run_and_write_files(tmp_path):
    micro = orrery.gen.microbench("all-reduce", "1MiB", ranks=8)
    assert micro.ranks == 8
    net = {"topology": ["Ring"], "npus_count": [8], "bandwidth": [50], "latency": [500]}
    system = {"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
              "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring"],
              "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
              "all-to-all-implementation": ["ring"], "collective-optimization": "localBWAware",
              "local-mem-bw": 1600}
    result = orrery.run(orrery.Scenario(micro, system, net))
    # ASTRA-sim's calibration figure for a 1 MiB ring all-reduce on Ring(8), 50 GB/s, 500 ns; an
    # algorithm changed on the same traces.
    assert result.finish_ns == 64440
    halving = orrery.Scenario(micro, system, net).replace(
        system={"all-reduce-implementation": ["halvingDoubling"]})
    assert orrery.run(halving).finish_ns != 64440
    micro.write(str(tmp_path / "m" / "w"))
    assert sorted(p.name for p in (tmp_path / "m").iterdir())[:2] == ["w.0.et", "w.1.et"]
    loaded = orrery.trace.load(str(tmp_path / "m" / "w"))
    node = loaded.nodes(3)[0]
    assert node["type"] == "COMM_COLL_NODE"
    assert node["attrs"]["comm_size"] == 1 << 20

    model = tmp_path / "small.json"
    model.write_text('{"base": "gpt3-6.7b", "layers": 4}')
    llm = orrery.gen.llm(model=str(model), tp=2, pp=2, dp=2, global_batch=8, seq=512)
    assert llm.ranks == 8 and llm.distinct_traces == 8 and len(llm.groups) > 0
    cube = {"topology": ["Ring", "Ring", "Switch"], "npus_count": [2, 2, 2],
            "bandwidth": [200, 100, 50], "latency": [500, 500, 1000]}
    roofline = dict(system, **{"all-reduce-implementation": ["ring"] * 3,
                               "all-gather-implementation": ["ring"] * 3,
                               "reduce-scatter-implementation": ["ring"] * 3,
                               "all-to-all-implementation": ["ring"] * 3,
                               "roofline-enabled": 1, "peak-perf": 300})
    in_memory = orrery.run(orrery.Scenario(llm, roofline, cube, strict=True))
    llm.write(str(tmp_path / "g" / "w"))
    from_files = orrery.run(orrery.Scenario(str(tmp_path / "g" / "w"), roofline, cube,
                                            comm_groups=str(tmp_path / "g" / "w.json"),
                                            strict=True))
    assert in_memory.finish_ns == from_files.finish_ns > 0
    assert len(orrery.gen.dlrm(ranks=4, global_batch=1024).nodes(0)) > 0
    assert orrery.gen.inference(tp=2, prompt_lengths=[128], output_lengths=[4]).ranks == 2


def test_class_trace_sets_of_gen_classes_load_and_run_as_the_rank_files(tmp_path):
    model = tmp_path / "small.json"
    model.write_text('{"base": "gpt3-6.7b", "layers": 4}')
    plan = ["--model", str(model), "--tp", "2", "--pp", "2", "--dp", "2", "--global-batch", "8",
            "--seq", "512"]
    subprocess.run([BINARY, "gen", "llm", *plan, "-o", str(tmp_path / "r" / "w")], check=True,
                   capture_output=True)
    subprocess.run([BINARY, "gen", "llm", *plan, "--classes", "-o", str(tmp_path / "c" / "w")],
                   check=True, capture_output=True)
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == \
        ["w.class.0.et", "w.class.1.et", "w.json", "w.ranks.json"]
    by_rank = orrery.trace.load(str(tmp_path / "r" / "w"))
    by_class = orrery.trace.load(str(tmp_path / "c" / "w"))
    assert by_class.ranks == by_rank.ranks == 8
    for rank in range(8):
        assert by_class.nodes(rank) == by_rank.nodes(rank)
    cube = {"topology": ["Ring", "Ring", "Switch"], "npus_count": [2, 2, 2],
            "bandwidth": [200, 100, 50], "latency": [500, 500, 1000]}
    system = json.loads((ROOT / "examples" / "gpt3_175b_1024" / "system.json").read_text())
    runs = [orrery.run(orrery.Scenario(str(tmp_path / form / "w"), system, cube,
                                       comm_groups=str(tmp_path / form / "w.json")))
            for form in ("r", "c")]
    documents = [without_wall(run.to_json()) for run in runs]
    for doc in documents:
        doc.pop("workload")
    assert documents[0] == documents[1]
    assert runs[0].finish_ns == runs[1].finish_ns > 0


def test_errors_are_orrery_errors_with_the_clis_message(tmp_path):
    with pytest.raises(orrery.Error) as caught:
        orrery.Scenario.from_files(workload=str(EXAMPLE / "workload"),
                                   system=str(EXAMPLE / "system.json"),
                                   network=str(tmp_path / "missing.yml"))
    cli = subprocess.run([BINARY, "run", "-w", str(EXAMPLE / "workload"), "-s",
                          str(EXAMPLE / "system.json"), "-n", str(tmp_path / "missing.yml")],
                         capture_output=True, text=True)
    assert cli.returncode == 1
    assert cli.stderr.strip() == f"orrery: error: {caught.value}"
    with pytest.raises(orrery.Error, match="unknown network backend 'garnet'"):
        example_scenario().replace(backend="garnet")
    with pytest.raises(orrery.Error, match="bandwidth: 1 values for a network of 2"):
        example_scenario().replace(bandwidth=[100])
    with pytest.raises(orrery.Error, match="unknown scenario option 'bandwith'"):
        example_scenario(bandwith=3)
    with pytest.raises(orrery.Error, match="gen.llm needs model="):
        orrery.gen.llm(tp=2)
    # A setting of the wrong type names it, not pybind11's "Unable to cast Python instance".
    with pytest.raises(orrery.Error, match="compute_scale: expected a number, found str 'fast'"):
        example_scenario().replace(compute_scale="fast")
    with pytest.raises(orrery.Error, match="threads: expected a whole number, found int -1"):
        example_scenario().replace(threads=-1)
    with pytest.raises(orrery.Error, match="fast_path 'on': expected True, False, 'auto' or 'off'"):
        example_scenario().replace(fast_path="on")
    # So do the scenario's own arguments.
    with pytest.raises(orrery.Error, match=r"bandwidth: expected a list of numbers, found list \[1, 'a'\]"):
        example_scenario().replace(bandwidth=[1, "a"])
    with pytest.raises(orrery.Error, match="workload: expected an orrery.TraceSet, found int 3"):
        example_scenario().replace(workload=3)
    with pytest.raises(orrery.Error,
                       match="workload: expected a trace prefix or an orrery.TraceSet, found int 3"):
        orrery.Scenario.from_files(workload=3, system=str(EXAMPLE / "system.json"),
                                   network=str(EXAMPLE / "network.yml"))


def test_fast_path_takes_the_command_lines_words_too():
    on = orrery.run(example_scenario(fast_path="auto"))
    off = orrery.run(example_scenario(fast_path="off"))
    assert on.to_json() != off.to_json()  # the fast path's note differs
    assert on.finish_ns == off.finish_ns == orrery.run(example_scenario(fast_path=False)).finish_ns


def test_threads_run_simulations_at_once_with_the_results_of_running_alone():
    base = example_scenario()
    scenarios = [base.replace(bandwidth=[100 * (1 + i), 25 * (1 + i)]) for i in range(6)]
    alone = [orrery.run(s).to_json() for s in scenarios]
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        together = list(pool.map(lambda s: orrery.run(s).to_json(), scenarios))
    assert together == alone


def test_a_fresh_interpreter_can_start_with_threads():
    # The first runs of a process on pool threads (pybind11's NumPy bindings are initialized at
    # import, not by whichever thread gets there first).
    script = f"""
import concurrent.futures, orrery
micro = orrery.gen.microbench("all-reduce", "64KiB", ranks=4)
net = {{"topology": ["Ring"], "npus_count": [4], "bandwidth": [50], "latency": [500]}}
system = {{"all-reduce-implementation": ["ring"], "local-mem-bw": 1600}}
s = orrery.Scenario(micro, system, net)
with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
    print(len({{r.finish_ns for r in pool.map(orrery.run, [s] * 8)}}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


def test_backends_are_the_registry():
    names = [b["name"] for b in orrery.backends()]
    assert names == ["analytical", "congestion-aware", "flow", "roce"]
    assert [b["graphs"] for b in orrery.backends()] == [True, True, True, True]


def test_libra_solve_gives_the_clis_optimum(tmp_path):
    problem = ROOT / "examples" / "libra" / "tp_dp_3d.yml"
    solved = orrery.libra.solve(str(problem))
    out = tmp_path / "libra.json"
    subprocess.run([BINARY, "libra", str(problem), "-o", str(out)], check=True,
                   capture_output=True)
    cli = json.loads(out.read_text())
    assert solved["optimum"] == cli["optimum"]


def test_a_perturbation_from_a_dict_runs_as_the_clis_perturb_file(tmp_path):
    perturb = {"compute": [{"ranks": "5", "factor": 1.5}],
               "links": [{"dimension": 0, "factor": 0.5}],
               "goodput": {"mtbf_hours": 5000, "checkpoint_s": 30, "restart_s": 120,
                           "horizon_hours": 10000}}
    path = tmp_path / "perturb.yml"
    path.write_text(json.dumps(perturb))
    result = orrery.run(example_scenario(perturb=perturb))
    healthy = orrery.run(example_scenario())
    assert result.finish_ns > healthy.finish_ns
    document = json.loads(result.to_json())
    assert document["simulation"]["mode"] == "full"
    assert "rank 5 computes at a factor of 1.5" in document["simulation"]["fast_path_note"]
    cli = json.loads(cli_document(tmp_path, "--perturb", str(path)))
    del document["perturbation"], cli["perturbation"]  # "perturbation" and the file's name
    cli["summary"]["wall_seconds"] = 0.0
    cli["simulation"]["fast_path_note"] = document["simulation"]["fast_path_note"]
    assert document == cli
    goodput = document["goodput"]
    assert goodput["components"] == 8
    assert abs(goodput["simulated"] - goodput["daly"]) < 0.02 * goodput["daly"]
    # Replacing the perturbation applies it to the given network once; None removes it.
    again = example_scenario(perturb=perturb).replace(perturb=perturb)
    assert orrery.run(again).finish_ns == result.finish_ns
    assert orrery.run(example_scenario(perturb=perturb).replace(perturb=None)).finish_ns == \
        healthy.finish_ns
    with pytest.raises(orrery.Error, match=r"perturbation:1: perturbation: unknown key 'slow'"):
        example_scenario(perturb={"slow": 1})
