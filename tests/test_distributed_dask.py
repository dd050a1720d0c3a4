"""Commands on a real Dask cluster: a ``dask scheduler`` and ``dask worker``
processes (the CLI entry points) on loopback, started here. Every output is
byte-identical to the single-process command's; a worker killed mid-import
changes nothing; a lost or unreachable scheduler, a worker without this
commcanary, and a file the workers cannot see are one line each, nothing
written."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commcanary.cli import app
from conftest import EXAMPLES, FIXTURES

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

DASK = Path(sys.executable).parent / "dask"
KINETO_JOBS = [
    FIXTURES / "kineto" / "gloo_tp4_decode",
    FIXTURES / "kineto" / "third_party_hta_nccl_allreduce_2rank",
]
runner = CliRunner()


@dataclass
class Cluster:
    address: str
    scheduler: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]]

    def stop(self) -> None:
        for p in [*self.workers, self.scheduler]:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in [*self.workers, self.scheduler]:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def start_worker(
    scheduler_file: Path,
    cwd: Path,
    name: str,
    env: dict[str, str] | None = None,
    preload: Path | None = None,
    hide: Path | None = None,
) -> subprocess.Popen[bytes]:
    """A ``dask worker`` process; with ``hide``, in a mount namespace of its
    own where an empty file system covers that directory (the worker's view
    of storage differs from the client's, as on another machine)."""
    cmd = [str(DASK), "worker", "--scheduler-file", str(scheduler_file), "--nthreads", "1"]
    cmd += ["--host", "127.0.0.1", "--no-dashboard", "--name", name]
    if preload is not None:
        cmd += ["--preload", str(preload)]
    if hide is not None:
        unshare = ["unshare", "-m", "--propagation", "private"] + ([] if os.geteuid() == 0 else ["-r"])
        script = f"mount -t tmpfs tmpfs {shlex.quote(str(hide))} && exec {shlex.join(cmd)}"
        cmd = [*unshare, "sh", "-c", script]
    with (cwd / f"{name}.log").open("wb") as log:
        return subprocess.Popen(cmd, cwd=cwd, env={**os.environ, **(env or {})}, stdout=log, stderr=log)


def start_cluster(
    where: Path,
    workers: int = 2,
    env: dict[str, str] | None = None,
    preload: Path | None = None,
    hide: Path | None = None,
) -> Cluster:
    """A scheduler and ``workers`` worker processes; workers run in their own
    directory (``where/workers``), so a relative path means something else
    to them than to the client."""
    where.mkdir(parents=True, exist_ok=True)
    scheduler_file = where / "scheduler.json"
    with (where / "scheduler.log").open("wb") as log:
        scheduler = subprocess.Popen(
            [
                str(DASK),
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(scheduler_file),
            ],
            cwd=where,
            stdout=log,
            stderr=log,
        )
    deadline = time.monotonic() + 60
    while not scheduler_file.exists() or not scheduler_file.read_text().strip():
        assert scheduler.poll() is None, (where / "scheduler.log").read_text()
        assert time.monotonic() < deadline, "the scheduler did not start"
        time.sleep(0.1)
    address = json.loads(scheduler_file.read_text())["address"]
    worker_dir = where / "workers"
    worker_dir.mkdir(exist_ok=True)
    procs = [start_worker(scheduler_file, worker_dir, f"w{i}", env, preload, hide) for i in range(workers)]
    cluster = Cluster(address, scheduler, procs)
    from distributed import Client

    with Client(address, timeout=30) as client:
        client.wait_for_workers(workers, timeout=60)
    return cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("dask"))
    yield c
    c.stop()


def use_plan(monkeypatch: pytest.MonkeyPatch, plan: str) -> None:
    """Forces the import's plan: ``gather``, ``sharded`` (shards whole),
    ``ranges`` (sharded, each shard cut into one range per step), ``auto``."""
    monkeypatch.setenv("COMMCANARY_IMPORT_PLAN", "sharded" if plan == "ranges" else plan)
    if plan == "ranges":
        monkeypatch.setenv("COMMCANARY_IMPORT_RANGES", "100000")
    else:
        monkeypatch.setenv("COMMCANARY_IMPORT_RANGES", "1")


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


@pytest.mark.parametrize("plan", ["sharded", "ranges", "gather", "auto"])
@pytest.mark.parametrize("job", KINETO_JOBS, ids=lambda p: p.name)
def test_import_kineto_on_the_cluster_writes_the_same_bytes(
    cluster: Cluster, job: Path, plan: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_plan(monkeypatch, plan)
    here, there = tmp_path / "here.json", tmp_path / "there.json"
    code, out = invoke("import-kineto", str(job), "-o", str(here), "--no-cache")
    assert code == 0, out
    code, out2 = invoke(
        "import-kineto", str(job), "-o", str(there), "--no-cache", "--cluster", cluster.address
    )
    assert code == 0, out2
    assert out2.replace(str(there), "X") == out.replace(str(here), "X")
    assert there.read_bytes() == here.read_bytes()


def test_import_kineto_with_the_workers_cache(cluster: Cluster, tmp_path: Path) -> None:
    """The workers fill the profile cache, then serve the import from it: the same bytes."""
    job = KINETO_JOBS[0]
    cache = tmp_path / "cache"
    outs = []
    for i in range(2):
        out = tmp_path / f"t{i}.json"
        code, text = invoke(
            "import-kineto", str(job), "-o", str(out), "--cache-dir", str(cache), "--cluster", cluster.address
        )
        assert code == 0, text
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    assert any((cache / "kineto-profiles").rglob("*.bin"))


def test_compile_many_on_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    traces = [EXAMPLES / "llama70b_tp8_trace.json", EXAMPLES / "llama70b_tp8_trace_long.json"]
    bad = tmp_path / "bad.trace.json"
    bad.write_text('{"format": "commcanary.trace.v1"}')
    code, out = invoke(
        "compile-many", *map(str, traces), str(bad), "-o", str(tmp_path / "out"), "--cluster", cluster.address
    )
    assert code == 3, out
    assert "FAILED" in out and "compiled 2 of 3 traces" in out
    for t in traces:
        single = tmp_path / "single.canary.json"
        code, text = invoke("compile", str(t), "-o", str(single))
        assert code == 0, text
        assert (tmp_path / "out" / (t.stem + ".canary.json")).read_bytes() == single.read_bytes()
    assert not (tmp_path / "out" / "bad.canary.json").exists()
    summary = json.loads((tmp_path / "out" / "compile-many.summary.json").read_bytes())
    assert [e["status"] for e in summary["traces"]] == ["compiled", "compiled", "failed"]
    # The same run here writes the same directory, summary included.
    code, _ = invoke("compile-many", *map(str, traces), str(bad), "-o", str(tmp_path / "here"))
    assert code == 3
    for name in ("compile-many.summary.json", "llama70b_tp8_trace.canary.json"):
        assert (tmp_path / "here" / name).read_bytes() == (tmp_path / "out" / name).read_bytes()


def test_a_file_the_workers_cannot_see(tmp_path: Path) -> None:
    """The client sees the job; the worker, in a mount namespace where the
    job's directory is an empty file system, does not: one line naming the
    file and the worker, nothing written."""
    job = tmp_path / "storage" / "job"
    shutil.copytree(KINETO_JOBS[0], job)
    c = start_cluster(tmp_path / "dask", workers=1, hide=tmp_path / "storage")
    try:
        out = tmp_path / "t.json"
        code, text = invoke("import-kineto", str(job), "-o", str(out), "--no-cache", "--cluster", c.address)
        assert code == 3, text
        assert "not found on Dask worker" in text and "rank0.json.gz" in text
        assert len(text.strip().splitlines()) == 1
        assert not out.exists()
    finally:
        c.stop()


def test_relative_paths_name_the_clients_files(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative path means what it means here, not in a worker's own
    directory; labels stay as given, so the output is the single-process one."""
    shutil.copytree(KINETO_JOBS[0], tmp_path / "job")
    monkeypatch.chdir(tmp_path)
    outputs = []
    for where, extra in (("here", []), ("there", ["--cluster", cluster.address])):
        code, text = invoke("import-kineto", "job", "-o", f"{where}.json", "--no-cache", *extra)
        assert code == 0, text
        outputs.append((tmp_path / f"{where}.json").read_bytes())
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("plan", ["ranges", "gather"])
def test_a_worker_killed_mid_import_changes_nothing(
    tmp_path: Path, plan: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_plan(monkeypatch, plan)
    marker = tmp_path / "crashed"
    c = start_cluster(tmp_path / "dask", env={"COMMCANARY_INJECT_WORKER_CRASH": str(marker)})
    try:
        job = KINETO_JOBS[0]
        here, there = tmp_path / "here.json", tmp_path / "there.json"
        assert invoke("import-kineto", str(job), "-o", str(here), "--no-cache")[0] == 0
        code, text = invoke("import-kineto", str(job), "-o", str(there), "--no-cache", "--cluster", c.address)
        assert code == 0, text
        assert marker.exists(), "no worker was killed"
        assert there.read_bytes() == here.read_bytes()
    finally:
        c.stop()


def test_an_unreachable_scheduler(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    code, text = invoke(
        "import-kineto", str(KINETO_JOBS[0]), "-o", str(out), "--cluster", "tcp://127.0.0.1:9", "--no-cache"
    )
    assert code == 3
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in text
    assert not out.exists()


def test_a_scheduler_that_goes_away(tmp_path: Path) -> None:
    from commcanary.distributed import cluster, import_kineto
    from commcanary.errors import ClusterError

    c = start_cluster(tmp_path / "dask", workers=1)
    try:
        with cluster(c.address) as client:
            c.scheduler.kill()
            c.scheduler.wait()
            with pytest.raises(ClusterError, match="lost the Dask cluster"):
                import_kineto(client, [KINETO_JOBS[0]])
    finally:
        c.stop()


HIDE_COMMCANARY = """
import sys

class _Hidden:
    def find_spec(self, name, path=None, target=None):
        if name == "commcanary" or name.startswith("commcanary."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, _Hidden())
"""

OTHER_VERSION = """
import commcanary
commcanary.__version__ = "0.0.0+other"
"""


@pytest.mark.parametrize(
    ("preload", "expected"),
    [(HIDE_COMMCANARY, "does not have commcanary installed"), (OTHER_VERSION, "has commcanary 0.0.0+other")],
    ids=["missing", "other-version"],
)
def test_a_worker_without_this_commcanary(tmp_path: Path, preload: str, expected: str) -> None:
    script = tmp_path / "preload_worker.py"
    script.write_text(preload)
    c = start_cluster(tmp_path / "dask", workers=1, preload=script)
    try:
        out = tmp_path / "t.json"
        code, text = invoke("import-kineto", str(KINETO_JOBS[0]), "-o", str(out), "--cluster", c.address)
        assert code == 3, text
        assert expected in text and "Dask worker tcp://127.0.0.1:" in text
        assert not out.exists()
    finally:
        c.stop()


def test_a_local_cluster_started_by_the_command(tmp_path: Path) -> None:
    """``--workers`` starts and stops a LocalCluster (the command as a process, as a user runs it)."""
    job = KINETO_JOBS[0]
    here, there = tmp_path / "here.json", tmp_path / "there.json"
    assert invoke("import-kineto", str(job), "-o", str(here), "--no-cache")[0] == 0
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "commcanary",
            "import-kineto",
            str(job),
            "-o",
            str(there),
            "--no-cache",
            "--workers",
            "2",
            "--worker-memory",
            "1GiB",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert there.read_bytes() == here.read_bytes()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--workers", "0"], "--workers must be at least 1"),
        (["--workers", "1", "--cluster", "tcp://127.0.0.1:9"], "--cluster and --workers are alternatives"),
        (["--worker-memory", "1GiB"], "--worker-memory needs --workers"),
        (["--workers", "1", "--worker-memory", "lots"], "--worker-memory lots is not a size"),
    ],
)
def test_cluster_option_misuse_is_a_usage_error(tmp_path: Path, args: list[str], expected: str) -> None:
    out = tmp_path / "t.json"
    code, text = invoke("import-kineto", str(KINETO_JOBS[0]), "-o", str(out), *args)
    assert code == 2
    assert expected in text
    assert not out.exists()


HANG = FIXTURES / "hang"
ANALYSES = [
    ("diagnose", "hang", str(HANG / "gloo_w4_desync_broadcast")),
    ("diagnose", "hang", str(HANG / "gloo_w4_pp_p2p_hang")),
    ("diagnose", "hang", str(HANG / "gloo_w4_rank_sigkill")),
    ("diagnose", "stragglers", str(FIXTURES / "kineto" / "gloo_w4_ddp_straggler" / "markers")),
    ("diagnose", "stragglers", str(FIXTURES / "kineto" / "gloo_w4_ddp_straggler" / "nomarkers")),
    ("steps", None, str(FIXTURES / "kineto" / "gloo_tp4_decode")),
    ("timeline", None, str(FIXTURES / "kineto" / "gloo_tp4_decode")),
    ("timeline", None, str(HANG / "gloo_w4_desync_broadcast" / "fr_during_hang")),
]


@pytest.mark.parametrize(("command", "sub", "evidence"), ANALYSES, ids=lambda v: str(v).rsplit("/", 1)[-1])
def test_analyses_on_the_cluster_write_the_same_bytes(
    cluster: Cluster, tmp_path: Path, command: str, sub: str | None, evidence: str
) -> None:
    """Dumps and traces decoded by tasks on the workers, the analysis run on
    the partials: the same lines, exit status and document bytes."""
    outputs = []
    for where, extra in (("here", []), ("there", ["--cluster", cluster.address])):
        out = tmp_path / f"{where}.json"
        args = [command, *([sub] if sub else []), evidence, "-o", str(out), "--no-cache", *extra]
        code, text = invoke(*args)
        assert code in (0, 1), text
        outputs.append((code, text.replace(str(out), "OUT"), out.read_bytes()))
    assert outputs[0] == outputs[1]


def test_a_damaged_dump_on_the_cluster_is_the_same_note(cluster: Cluster, tmp_path: Path) -> None:
    """A truncated dump is skipped and said, word for word as here."""
    job = tmp_path / "job"
    shutil.copytree(HANG / "gloo_w4_desync_broadcast" / "fr_during_hang", job)
    import gzip

    whole = gzip.decompress((job / "fr_trace_rank_2.gz").read_bytes())
    for name in ("fr_trace_rank_2.gz", "fr_trace_rank_2.json.gz"):
        (job / name).unlink()
    (job / "fr_trace_rank_2").write_bytes(whole[: len(whole) // 2])  # a pickle cut in the middle
    results = []
    for where, extra in (("here", []), ("there", ["--cluster", cluster.address])):
        out = tmp_path / f"{where}.json"
        code, text = invoke("diagnose", "hang", str(job), "-o", str(out), "--no-cache", *extra)
        results.append((code, text.replace(str(out), "OUT"), out.read_bytes()))
    assert results[0] == results[1]
    document = json.loads(results[0][2])
    (note,) = [f for f in document["evidence"] if f["file"].endswith("fr_trace_rank_2")]
    assert note["reason"].startswith("damaged: ")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--cluster", "http://127.0.0.1:9"], "cannot reach the Dask scheduler at http://127.0.0.1:9"),
    ],
)
def test_a_cluster_that_cannot_be_had_is_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    out = tmp_path / "t.json"
    done = subprocess.run(
        [sys.executable, "-m", "commcanary", "import-kineto", str(KINETO_JOBS[0]), "-o", str(out), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    assert expected in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert not out.exists()


@pytest.fixture(scope="module")
def http_storage() -> Iterator[str]:
    """The test data served over HTTP by a real server process on loopback:
    storage the workers reach by URL (fsspec's http protocol)."""
    root = FIXTURES.parent.parent  # tests/
    server = subprocess.Popen(
        [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert server.stdout is not None
    line = server.stdout.readline().decode()  # "Serving HTTP on 127.0.0.1 port N (http://...) ..."
    port = int(line.split(" port ")[1].split()[0])
    yield f"http://127.0.0.1:{port}"
    server.terminate()
    server.wait(timeout=20)
    server.stdout.close()


def url_of(base: str, path: Path) -> str:
    return f"{base}/{path.relative_to(FIXTURES.parent.parent).as_posix()}"


def test_import_kineto_of_a_url_directory(cluster: Cluster, http_storage: str, tmp_path: Path) -> None:
    """The workers list, sniff and read the job over HTTP (the directory's
    ground truth and op log are left out, as locally): the same bytes."""
    job = KINETO_JOBS[0]
    here, there = tmp_path / "here.json", tmp_path / "there.json"
    assert invoke("import-kineto", str(job), "-o", str(here), "--no-cache")[0] == 0
    code, text = invoke(
        "import-kineto",
        url_of(http_storage, job) + "/",
        "-o",
        str(there),
        "--no-cache",
        "--cluster",
        cluster.address,
    )
    assert code == 0, text
    assert there.read_bytes() == here.read_bytes()


def test_import_kineto_of_url_files_and_a_glob(cluster: Cluster, http_storage: str, tmp_path: Path) -> None:
    job = KINETO_JOBS[0]
    here = tmp_path / "here.json"
    assert invoke("import-kineto", str(job), "-o", str(here), "--no-cache")[0] == 0
    files = [url_of(http_storage, job / f"rank{r}.json.gz") for r in range(4)]
    for i, args in enumerate((files, [url_of(http_storage, job) + "/rank*.json.gz"])):
        out = tmp_path / f"there{i}.json"
        code, text = invoke(
            "import-kineto", *args, "-o", str(out), "--no-cache", "--cluster", cluster.address
        )
        assert code == 0, text
        assert out.read_bytes() == here.read_bytes()


def test_compile_many_of_urls(cluster: Cluster, http_storage: str, tmp_path: Path) -> None:
    """Canaries of traces read over HTTP are those of a local compile."""
    trace = EXAMPLES / "llama70b_tp8_trace.json"
    served = tmp_path / "served"
    shutil.copy(trace, FIXTURES.parent / "served_for_compile_many.trace.json")
    try:
        url = f"{http_storage}/data/served_for_compile_many.trace.json"
        code, text = invoke("compile-many", url, "-o", str(served), "--cluster", cluster.address)
        assert code == 0, text
        assert "compiled 1 of 1" in text
        single = tmp_path / "single.canary.json"
        assert invoke("compile", str(trace), "-o", str(single))[0] == 0
        assert (served / "served_for_compile_many.canary.json").read_bytes() == single.read_bytes()
        summary = json.loads((served / "compile-many.summary.json").read_bytes())
        assert summary["traces"][0]["trace"] == url
    finally:
        (FIXTURES.parent / "served_for_compile_many.trace.json").unlink()


@pytest.mark.parametrize(
    ("command", "target", "expected"),
    [
        (
            "import-kineto",
            "/data/fixtures/kineto/gloo_tp4_decode/rank9.json.gz",
            "rank9.json.gz does not exist",
        ),
        ("import-kineto", "/data/fixtures/kineto/nosuchjob/", "does not exist"),
        ("compile-many", "/data/nosuch.trace.json", "nosuch.trace.json does not exist"),
        (
            "import-kineto",
            "nosuchprotocol://bucket/job/",
            "nosuchprotocol://bucket/job/: cannot open this URL here",
        ),
    ],
)
def test_a_url_that_cannot_be_read_is_one_line(
    cluster: Cluster, http_storage: str, tmp_path: Path, command: str, target: str, expected: str
) -> None:
    url = target if "://" in target else http_storage + target
    out = tmp_path / ("out" if command == "compile-many" else "t.json")
    code, text = invoke(command, url, "-o", str(out), "--cluster", cluster.address)
    assert code == 3, text
    assert expected in text and len(text.strip().splitlines()) == 1, text
    assert not out.exists()


def test_a_url_without_a_cluster_is_a_usage_error(tmp_path: Path) -> None:
    for command in ("import-kineto", "compile-many"):
        code, text = invoke(command, "s3://bucket/job/", "-o", str(tmp_path / "x"))
        assert code == 2, text
        assert "URL inputs are read by Dask workers" in text
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    ("job", "sharded"),
    [
        (FIXTURES / "kineto" / "gloo_tp4_decode", True),
        (FIXTURES / "kineto" / "gloo_w4_ddp_straggler" / "markers", True),
        (FIXTURES / "kineto" / "gloo_w4_ddp_straggler" / "nomarkers", False),
        (FIXTURES / "hang" / "gloo_w4_rank_sigkill", True),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else str(v),
)
def test_the_import_plan_and_its_bytes(
    cluster: Cluster, job: Path, sharded: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job with step markers is aligned and written shard by shard on the
    workers (a rank's windows joined on a worker first); one without markers
    (steps recovered from the whole sequence) is merged here. Either way,
    the single-process bytes."""
    import commcanary.distributed as dist

    plans: list[bool] = []
    real = dist._import_sharded

    def spy(*args: object, **kwargs: object) -> object:
        result = real(*args, **kwargs)  # type: ignore[arg-type]
        plans.append(result is not None)
        return result

    monkeypatch.setattr(dist, "_import_sharded", spy)
    monkeypatch.setenv(dist.IMPORT_PLAN_VAR, "sharded")
    here, there = tmp_path / "here.json", tmp_path / "there.json"
    code, out = invoke("import-kineto", str(job), "-o", str(here), "--no-cache")
    code2, out2 = invoke(
        "import-kineto", str(job), "-o", str(there), "--no-cache", "--cluster", cluster.address
    )
    assert (code2, out2.replace(str(there), "X")) == (code, out.replace(str(here), "X"))
    assert plans == [sharded]
    if code == 0:
        assert there.read_bytes() == here.read_bytes()


@pytest.mark.parametrize("plan", ["sharded", "ranges"])
@pytest.mark.parametrize("extra", [[], ["--strict"], ["--phase", "serve", "--workload-name", "tp3"]])
def test_a_rank_missing_on_the_sharded_plan(
    cluster: Cluster, tmp_path: Path, extra: list[str], plan: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three of four ranks: partial collectives listed (or refused with
    --strict) exactly as the single-process import does."""
    use_plan(monkeypatch, plan)
    job = tmp_path / "job"
    job.mkdir()
    for r in range(3):
        shutil.copy(FIXTURES / "kineto" / "gloo_tp4_decode" / f"rank{r}.json.gz", job)
    here, there = tmp_path / "here.json", tmp_path / "there.json"
    code, out = invoke("import-kineto", str(job), "-o", str(here), "--no-cache", *extra)
    code2, out2 = invoke(
        "import-kineto", str(job), "-o", str(there), "--no-cache", "--cluster", cluster.address, *extra
    )
    assert (code2, out2.replace(str(there), "X")) == (code, out.replace(str(here), "X"))
    assert ("partial" in out) or code != 0
    if code == 0:
        assert there.read_bytes() == here.read_bytes()
    else:
        assert not there.exists()


def test_the_plan_is_gather_while_the_merge_fits_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a forced plan, a job whose merge fits in half the memory
    available here is gathered (the faster plan), a larger one sharded."""
    from commcanary.distributed import GATHER_PEAK_PER_PROFILE_BYTE, IMPORT_PLAN_VAR, choose_plan

    monkeypatch.delenv(IMPORT_PLAN_VAR, raising=False)
    gib = 1 << 30
    assert choose_plan(gib // GATHER_PEAK_PER_PROFILE_BYTE, available_bytes=4 * gib) == "gather"
    assert choose_plan(gib, available_bytes=4 * gib) == "sharded"
    assert choose_plan(10**6) == "gather"  # this machine, a small job
    for forced in ("gather", "sharded"):
        monkeypatch.setenv(IMPORT_PLAN_VAR, forced)
        assert choose_plan(10**15, available_bytes=1) == forced
