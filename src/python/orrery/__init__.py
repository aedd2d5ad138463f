"""orrery: design distributed AI systems from their workload traces, from Python.

The same simulator as the `orrery` command, in memory:

    import orrery
    s = orrery.Scenario.from_files(workload="examples/llama_dp2tp2pp2/workload",
                                   system="examples/llama_dp2tp2pp2/system.json",
                                   network="examples/llama_dp2tp2pp2/network.yml",
                                   comm_groups="examples/llama_dp2tp2pp2/workload.json")
    r = orrery.run(s)
    r.finish_ns, r.ranks["exposed_comm_ns"], r.collectives[0], r.to_json()
    faster = orrery.run(s.replace(bandwidth=[400, 100]))

Scenarios are immutable; replace() makes a new one that shares the loaded traces. run() releases
the GIL, so a thread pool runs simulations in parallel. Every error is an orrery.Error whose
message is what the command line prints. docs/python.md documents the API.
"""
import json as _json

from . import _orrery
from ._orrery import Error, TraceSet

__all__ = ["Error", "Scenario", "Result", "Table", "TraceSet", "run", "backends", "gen", "trace",
           "libra"]


def backends():
    """The network backends (name, description, and which networks each runs on)."""
    return _orrery.backends()


class Table(list):
    """Rows as dicts (collectives, links); to_pandas() when pandas is installed."""

    def to_pandas(self):
        import pandas  # optional: only this method needs it
        return pandas.DataFrame(list(self))


class Ranks(dict):
    """Per-rank figures as NumPy arrays keyed by the names `orrery run --output` uses
    (rank, finish_ns, exposed_comm_ns, compute_ns, cpu_ns, comm_ns, comm_not_overlapped_ns,
    memory_ns, idle_ns)."""

    def to_pandas(self):
        import pandas
        return pandas.DataFrame(dict(self))


class Scenario:
    """The validated inputs of one run: workload, system, network, memory, groups, settings.

    Settings (keywords of from_files, the constructor and replace): backend (see backends()),
    timing ("astra-sim" or "exact"), strict, fast_path, compute_scale, comm_scale,
    injection_scale, queues_per_dim, memory_capacity (bytes or "80GiB"), threads, roce (a YAML
    path or a dict), perturb (slow ranks, noise, degraded links, failures: a YAML path or a dict
    of the keys of docs/formats/perturb.md; None removes it), and for files uniform (every rank
    runs rank 0's trace).
    """

    def __init__(self, workload, system, network, comm_groups=None, memory=None,
                 backend="analytical", **settings):
        """workload: a TraceSet (orrery.gen.*, orrery.trace.load) or a trace prefix; system: a
        system JSON path or dict of its keys; network: a network YAML path or a dict
        ({"topology": ["Ring"], "npus_count": [8], "bandwidth": [50], "latency": [500]});
        comm_groups, memory: paths, dicts or None."""
        self._native = _orrery.make_scenario(workload, system, network, comm_groups, memory,
                                             backend=backend, **settings)

    @classmethod
    def from_files(cls, workload, system, network, comm_groups=None, memory=None,
                   backend="analytical", **settings):
        """A scenario from ASTRA-sim's files, read as `orrery run` reads them."""
        return cls(workload, system, network, comm_groups, memory, backend, **settings)

    @classmethod
    def _wrap(cls, native):
        scenario = cls.__new__(cls)
        scenario._native = native
        return scenario

    def replace(self, **changes):
        """A new scenario with changes: bandwidth=[GB/s per dimension], latency=[ns per
        dimension] (ASTRA-sim networks), system={system-file keys to set}, workload=TraceSet,
        comm_groups=..., or any setting. The traces are shared, never read again."""
        return Scenario._wrap(self._native.replace(**changes))

    @property
    def ranks(self):
        return self._native.ranks

    @property
    def backend(self):
        return self._native.backend

    @property
    def bandwidth(self):
        """GB/s per dimension of the network's logical layout."""
        return self._native.bandwidth

    @property
    def system(self):
        """The system configuration's keys, as a dict."""
        return _json.loads(self._native.system)

    @property
    def warnings(self):
        return list(self._native.warnings)

    def __repr__(self):
        return f"<orrery.Scenario: {self.ranks} ranks, {self.backend} backend>"


class Result:
    """What a run did: finish_ns (the slowest rank), ranks (NumPy arrays), collectives and links
    (Tables of dicts), dimensions, summary, warnings; to_json() is `orrery run --output`'s
    document (with wall_seconds 0)."""

    def __init__(self, native):
        self._native = native
        self._doc = None
        self.finish_ns = native.finish_ns
        self.ranks = Ranks(native.ranks)
        self.warnings = list(native.warnings)

    def _document(self):
        if self._doc is None:
            self._doc = _json.loads(self._native.json)
        return self._doc

    @property
    def collectives(self):
        return Table(self._document()["collectives"])

    @property
    def links(self):
        return Table(self._document()["links"])

    @property
    def dimensions(self):
        return Table(self._document()["dimensions"])

    @property
    def summary(self):
        return self._document()["summary"]

    def to_json(self):
        return self._native.json

    def __repr__(self):
        return f"<orrery.Result: {len(self.ranks['rank'])} ranks, finish {self.finish_ns} ns>"


def run(scenario):
    """Simulates the scenario and returns its Result. Releases the GIL while it runs."""
    return Result(_orrery.run(scenario._native))


class _Gen:
    """Workload generators returning in-memory TraceSets (write(prefix) makes the files)."""

    @staticmethod
    def llm(**options):
        """Training iterations of a transformer under a parallel plan: the options of
        `orrery gen llm` by name (model="gpt3-175b", tp=8, pp=4, dp=2, global_batch=...,
        micro_batch, seq, cp, ep, sp, zero, recompute, schedule, virtual_stages, dtype,
        bucket_size), plus threads."""
        return _orrery.gen_llm(**options)

    @staticmethod
    def microbench(kind="all-reduce", size="1MiB", ranks=8, compute_us=0):
        """One collective per rank, in the shape of ASTRA-sim's microbenchmarks."""
        return _orrery.gen_microbench(kind, str(size), ranks, compute_us)

    @staticmethod
    def dlrm(model="dlrm-kaggle", ranks=8, global_batch=4096, sharding="table", threads=0):
        """A DLRM training iteration (`orrery gen dlrm`'s presets or a model file)."""
        return _orrery.gen_dlrm(model, ranks, global_batch, sharding, threads)

    @staticmethod
    def inference(model="llama2-7b", tp=1, pp=1, prompt_lengths=(512,), output_lengths=(128,),
                  micro_batches=1, threads=0):
        """Prefill and decode of a batch of requests (`orrery gen inference`)."""
        return _orrery.gen_inference(model, tp, pp, list(prompt_lengths), list(output_lengths),
                                     micro_batches, threads)


class _Trace:
    @staticmethod
    def load(path, uniform=False, threads=0):
        """A Chakra trace set (one .et file, or a prefix of rank files); nodes(rank) lists each
        node's id, name, type, duration_micros, data_deps, ctrl_deps and attrs."""
        return _orrery.load_traces(path, uniform, threads)


class _Libra:
    @staticmethod
    def solve(problem):
        """LIBRA's optimal bandwidth per dimension for orrery's problem file (YAML or JSON):
        the document `orrery libra -o` writes, as a dict."""
        return _json.loads(_orrery.libra_solve(problem))


gen = _Gen()
trace = _Trace()
libra = _Libra()
