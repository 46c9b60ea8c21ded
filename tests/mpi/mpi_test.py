#!/usr/bin/env python3
"""Tuning under mpirun on one machine (docs/mpi.md): the records of an N-rank
run equal a local run's, a rank killed (kill -9) or stopped (SIGSTOP) mid-run
loses nothing and measures nothing twice, a killed rank 0 leaves a log that
the same command resumes, libraries built on one host are run on another,
and a rank of another build is refused by name before any candidate.

Every run uses the simulated measurement (--simulate-measure): candidates are
lowered, not compiled, and "cost" a function of their program, so runs are
deterministic and fast.

usage: mpi_test.py --tensortune PATH --foreign-rank PATH --work DIR
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

TRIALS = 40
SKIP = 77  # ctest's SKIP_RETURN_CODE for this test
# The batch size is given: under MPI it would otherwise grow with the build
# workers, and a run's states depend on it.
TUNE = ["tune", "--workload", "matmul", "--args", "64,64,64", "--trials", str(TRIALS),
        "--seed", "3", "--batch-size", "16"]


def env():
    e = dict(os.environ)
    # CI runs as root; Open MPI refuses that unless told.
    e["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    e["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return e


def mpirun(ranks, extra=()):
    return ["mpirun", *extra, "-n", str(ranks), "--oversubscribe"]


def records(path):
    """Each record without what differs from run to run (times, and who measured it)."""
    out = []
    with open(path) as f:
        for line in f:
            graph = json.loads(line)
            for node in graph["nodes"]:
                for key in ("build_seconds", "run_seconds", "timestamp", "kernel_seconds", "host",
                            "rank"):
                    node.pop(key, None)
            out.append(json.dumps(graph, sort_keys=True))
    return out


def ranks_of(path):
    found = set()
    with open(path) as f:
        for line in f:
            for node in json.loads(line)["nodes"]:
                if node.get("type") == "measure.MeasureResult":
                    found.add(node.get("rank"))
    return found


def parent_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        return int(f.read().rsplit(")", 1)[1].split()[1])


def rank_pid(rank, parent, program):
    """The pid of MPI rank `rank`: a process running `program` (not one of
    its workers, which inherit the rank's environment) under `parent`."""
    program = os.path.realpath(program)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.path.realpath(f"/proc/{pid}/exe") != program:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            if b"OMPI_COMM_WORLD_RANK=%d" % rank not in environ:
                continue
            up = int(pid)
            while up > 1 and up != parent:
                up = parent_of(up)
        except OSError:
            continue
        if up == parent:
            return int(pid)
    return None


failures = []


def expect(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tensortune", required=True)
    ap.add_argument("--foreign-rank", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    tt = a.tensortune
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    # Whether this machine can run an MPI job at all (a container without
    # the shared memory or network Open MPI needs cannot): if not, the test
    # is skipped, saying why, rather than failing on the machine's account.
    probe = subprocess.run(mpirun(2) + ["true"], env=env(), capture_output=True, text=True,
                           timeout=120)
    if probe.returncode != 0:
        print("SKIPPED: mpirun cannot start a 2-process job here:\n" + probe.stderr[-2000:])
        return SKIP
    log = lambda name: os.path.join(a.work, name + ".jsonl")
    sim = ["--simulate-measure", "0", "--runners-per-host", "3", "--parallelism", "3"]

    # 1. The same records as a local run, in the same order.
    local = subprocess.run([tt, *TUNE, "--log", log("local"), "--simulate-measure", "0"],
                           env=env(), capture_output=True, text=True)
    expect(local.returncode == 0, "local run: " + local.stderr[-500:])
    run = subprocess.run(mpirun(4) + [tt, *TUNE, "--log", log("mpi"), *sim, "--json"], env=env(),
                         capture_output=True, text=True, timeout=300)
    expect(run.returncode == 0, "4-rank run exits 0: " + run.stderr[-2000:])
    expect("over 3 MPI ranks" in run.stderr, "the first line names the ranks")
    expect(records(log("local")) == records(log("mpi")),
           "a 4-rank run writes the records of a local run, in order")
    expect(ranks_of(log("mpi")) == {1, 2, 3}, "each record names its rank: %s" %
           sorted(ranks_of(log("mpi")), key=str))
    expect(json.loads(run.stdout)["trials"] == TRIALS, "rank 0 prints the report")
    best = subprocess.run([tt, "records", "best", log("mpi")], env=env(), capture_output=True,
                          text=True)
    expect(best.returncode == 0, "records best reads the log: " + best.stderr[-500:])
    resumed = subprocess.run(mpirun(3) + [tt, *TUNE, "--log", log("mpi"), *sim], env=env(),
                             capture_output=True, text=True, timeout=300)
    expect(resumed.returncode == 0 and len(records(log("mpi"))) == 2 * TRIALS,
           "a resumed run appends to the log")

    # 2. A rank killed or stopped mid-run: detected, its work done by another.
    slow = ["--simulate-measure", "150", "--runners-per-host", "3", "--parallelism", "3",
            "--rank-timeout", "2"]
    reference = subprocess.run([tt, *TUNE, "--log", log("slow_local"), "--simulate-measure", "0"],
                               env=env(), capture_output=True, text=True)
    expect(reference.returncode == 0, "local reference run: " + reference.stderr[-500:])
    for name, sig, extra in (("killed", signal.SIGKILL, ["--enable-recovery"]),
                             ("stopped", signal.SIGSTOP, [])):
        proc = subprocess.Popen(mpirun(4, extra) + [tt, *TUNE, "--log", log(name), *slow],
                                env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        victim = None
        deadline = time.time() + 60
        while victim is None and time.time() < deadline:
            time.sleep(0.2)
            if os.path.exists(log(name)) and len(open(log(name)).readlines()) >= 8:
                victim = rank_pid(2, proc.pid, tt)
        expect(victim is not None, f"{name}: rank 2 found mid-run")
        if victim:
            os.kill(victim, sig)
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        if victim and sig == signal.SIGSTOP:
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                pass
        expect("rank 2 on" in err and "is lost" in err, f"{name}: the loss is reported")
        expect(records(log(name)) == records(log("slow_local")),
               f"{name}: nothing lost, nothing measured twice, same records as a local run")
        if not extra:
            expect(proc.returncode == 4, f"{name}: the job exits 4 ({proc.returncode})")

    # 3. Rank 0 killed: mpirun ends the job, the log holds whole records
    # only, and the same command resumes it.
    proc = subprocess.Popen(mpirun(4) + [tt, *TUNE, "--log", log("rank0"), *slow],
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim = None
    deadline = time.time() + 60
    while victim is None and time.time() < deadline:
        time.sleep(0.2)
        if os.path.exists(log("rank0")) and len(open(log("rank0")).readlines()) >= 8:
            victim = rank_pid(0, proc.pid, tt)
    expect(victim is not None, "rank 0 found mid-run")
    if victim:
        os.kill(victim, signal.SIGKILL)
    try:
        proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
    expect(proc.returncode != 0, "a killed rank 0 fails the job")
    before = len(records(log("rank0")))  # every line parses
    expect(0 < before < TRIALS, f"the log holds the {before} records written before")
    again = subprocess.run(mpirun(4) + [tt, *TUNE, "--log", log("rank0"), *sim], env=env(),
                           capture_output=True, text=True, timeout=300)
    expect(again.returncode == 0 and len(records(log("rank0"))) == before + TRIALS,
           "the same command resumes the log")

    # 4. Two "hosts" on this machine (TENSORTUNE_HOST_NAME), real builds:
    # libraries built on one are shipped to the runner of the other.
    cache = os.path.abspath(os.path.join(a.work, "cache"))
    e = env()
    e["XDG_CACHE_HOME"] = cache
    real = ["tune", "--workload", "matmul", "--args", "64,64,64", "--trials", "12", "--seed",
            "3", "--log", log("hosts"), "--parallelism", "1"]
    hosts = subprocess.run(
        ["mpirun", "--oversubscribe", "-n", "1", tt, *real,
         ":", "-n", "1", "-x", "TENSORTUNE_HOST_NAME=host-a", tt, *real,
         ":", "-n", "1", "-x", "TENSORTUNE_HOST_NAME=host-b", tt, *real],
        env=e, capture_output=True, text=True, timeout=300)
    expect(hosts.returncode == 0, "a job of two hosts: " + hosts.stderr[-1500:])
    expect("on 2 hosts" in hosts.stderr, "rank 0 sees two hosts")
    measured = []
    with open(log("hosts")) as f:
        for line in f:
            for node in json.loads(line)["nodes"]:
                if node.get("type") == "measure.MeasureResult":
                    measured.append((node["error_code"], node.get("host")))
    expect(len(measured) == 12 and all(code == "NO_ERROR" for code, _ in measured),
           "every candidate built on one host ran: %s" % measured)
    expect({h for _, h in measured} == {"host-a", "host-b"}, "both hosts timed candidates")
    shipped = os.path.join(cache, "tensortune", "mpi-libraries")
    expect(os.path.isdir(shipped) and any(n.endswith(".so") for n in os.listdir(shipped)),
           "libraries were shipped between the hosts")

    # 5. A rank of another build is refused by name before any candidate.
    protocol = subprocess.run([tt, "version", "--json"], env=env(), capture_output=True,
                              text=True)
    version = "0"
    try:
        version = str(json.loads(protocol.stdout)["protocol_version"])
    except (ValueError, KeyError):
        pass
    foreign = subprocess.run(
        ["mpirun", "--oversubscribe", "-n", "2", tt, *TUNE, "--log", log("foreign"), *sim, ":",
         "-n", "1", a.foreign_rank, version], env=env(), capture_output=True, text=True,
        timeout=120)
    expect(foreign.returncode != 0, "a foreign rank fails the job")
    expect("rank 2 on elsewhere runs another build of tensortune" in foreign.stderr,
           "the foreign rank is named: " + foreign.stderr[-1500:])
    expect(not os.path.exists(log("foreign")) or not records(log("foreign")),
           "nothing was measured")

    if failures:
        print(f"{len(failures)} failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
