#!/usr/bin/python3
"""ONNX's own backend node tests through `tensortune compile` and `run`.

Each test of Debian's libonnx-testdata (/usr/share/libonnx-testdata/data/node:
one operator's model, its inputs and expected outputs as TensorProto .pb
files) is compiled with default schedules, run on its inputs, and its
outputs compared with the expected ones at ONNX's backend tolerance
(rtol 1e-3, atol 1e-7; 1e-3 absolute for float16). Prints, per operator, how
many passed, failed (a wrong answer or an error), or were refused as
unsupported (the importer's list of gaps), then the totals and what is
still unsupported.

    scripts/onnx_backend_tests.py [--tensortune build/tensortune] [--sample N]
        [--filter REGEX] [--jobs J] [--json OUT] [--work DIR] [--list-failed]
        [--max-failed N]

A test whose outputs differ from ONNX's expected ones but match ONNX
Runtime's on the same inputs (tools/ort, when installed) passes: ONNX
Runtime is the reference; the totals count these.

A test whose model needs an input as a constant (ONNX's tests give shapes,
axes, pads and scales as inputs, where exported models have constants) is
compiled again with those inputs fixed to the test's values
(`compile --input-value`); the totals say how many passed that way.

--sample N takes a fixed sample of N tests (every k-th in name order), the
same on every run. Needs python3-onnx and python3-numpy (Debian), and the
libonnx-testdata package.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

DATA = "/usr/share/libonnx-testdata/data/node"
ORT_RUN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "ort", "ort_run.js")


def npy_names(names):
    """The file of each output in a --output-dir, as `tensortune run` names them."""
    taken, files = set(), []
    for stem in names:
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", stem)
        if stem in ("", ".", ".."):
            stem = "_" + stem
        f, k = stem + ".npy", 2
        while f in taken:
            f, k = f"{stem}_{k}.npy", k + 1
        taken.add(f)
        files.append(f)
    return files


def operator_of(model):
    """The operator a node test is about: its model's last node's type (the
    tests that build a value first, such as a shape, put the subject last)."""
    nodes = list(model.graph.node)
    if not nodes:
        return "?"
    n = nodes[-1]
    return (n.domain + "." if n.domain not in ("", "ai.onnx") else "") + n.op_type


def close(ours, expected, bf16=False):
    if ours.shape != expected.shape:
        return f"shape {list(ours.shape)}, expected {list(expected.shape)}"
    if bf16:
        # Within one bfloat16 step: ONNX 1.12's data truncates where ONNX
        # 1.14's reference and ONNX Runtime round to nearest even.
        def steps(x):  # bfloat16 bits as integers in the order of the values (-0 = +0)
            bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.int64) >> 16
            return np.where(bits < 0x8000, bits, 0x8000 - bits)
        both_nan = np.isnan(ours.astype(np.float32)) & np.isnan(expected.astype(np.float32))
        bad = (np.abs(steps(ours) - steps(expected)) > 1) & ~both_nan
        if bad.any():
            i = int(np.argmax(bad))
            return f"{int(bad.sum())} of {bad.size} values differ by more than one bfloat16 step (first at {i})"
        return None
    if expected.dtype.kind in "fc":
        atol = 1e-3 if expected.dtype == np.float16 else 1e-7
        a, b = ours.astype(np.float64), expected.astype(np.float64)
        same_nan = np.isnan(a) & np.isnan(b)
        bad = ~(np.isclose(a, b, rtol=1e-3, atol=atol) | same_nan)
        if bad.any():
            i = int(np.argmax(bad))
            return f"{int(bad.sum())} of {bad.size} values differ (first at {i}: {a.flat[i]} vs {b.flat[i]})"
        return None
    if ours.dtype != expected.dtype:
        return f"dtype {ours.dtype}, expected {expected.dtype}"
    if not np.array_equal(ours, expected):
        return f"{int((ours != expected).sum())} of {ours.size} values differ"
    return None


ORT_NOTE = "ONNX's expected output differs; ONNX Runtime's is ours"

# Gaps that fixing inputs to the test's values at compile time removes:
# ONNX's tests give shapes, axes, pads, scales and bounds as inputs, where
# exported models have constants.
NEEDS_CONSTANT = re.compile(r"must be a constant|needs constant|dynamic dimension|is known only at run time"
                            r"|an extent of 0")


def compile_model(tensortune, model_path, compiled, fixed):
    """("ok" | "unsupported" | "fail", detail)."""
    args = [tensortune, "compile", model_path, "-o", compiled, "--json"]
    for name, file in fixed:
        args += ["--input-value", f"{name}={file}"]
    try:
        c = subprocess.run(args, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return "fail", "compile timed out"
    if c.returncode == 0:
        return "ok", ""
    try:
        report = json.loads(c.stdout)
    except json.JSONDecodeError:
        report = {}
    if report.get("unsupported"):
        return "unsupported", "; ".join(f"{g.get('kind')}: {g.get('what')}" for g in report["unsupported"])
    return "fail", "compile: " + (c.stderr.strip() or c.stdout.strip())[-400:]


ORT_INSTALLED = bool(shutil.which("node")) and os.path.exists(os.path.join(os.path.dirname(ORT_RUN), "node_modules"))


def ort_agrees(model_path, inputs, ours_dir, outputs, out, bf16_outputs=frozenset()):
    """Whether ONNX Runtime, run on the same inputs, gives our outputs: ONNX
    Runtime is the reference where ONNX's expected outputs and it differ
    (ONNX 1.12's align_corners resize maps by the unrounded extent, ONNX
    Runtime by the output's). False when ONNX Runtime is not installed or fails."""
    if not ORT_INSTALLED:
        return False
    args = ["node", ORT_RUN, model_path, "--output-dir", os.path.join(out, "ort")]
    for input_name, file in inputs:
        t = onnx.TensorProto()
        with open(file, "rb") as fh:
            t.ParseFromString(fh.read())
        npy = os.path.join(out, f"ort_input_{len(args)}.npy")
        np.save(npy, numpy_helper.to_array(t))
        args += ["--input", f"{input_name}={npy}"]
    try:
        if subprocess.run(args, capture_output=True, timeout=600).returncode != 0:
            return False
        return all(close(np.load(os.path.join(ours_dir, f)), np.load(os.path.join(out, "ort", f)),
                         bf16=name in bf16_outputs) is None
                   for name, f in zip(outputs, npy_names(outputs)))
    except (subprocess.TimeoutExpired, OSError, ValueError):
        return False


def run_test(name, tensortune, work):
    """One test: ("pass" | "fail" | "unsupported" | "invalid", operator,
    detail); "invalid" is a test whose data contradicts its model (not run);
    a pass that needed inputs fixed at compile time says so in its detail."""
    src = os.path.join(DATA, name)
    try:
        model = onnx.load(os.path.join(src, "model.onnx"))
    except Exception as e:  # noqa: BLE001 - a file ONNX itself cannot read
        return "fail", "?", f"onnx cannot load it: {e}"
    op = operator_of(model)
    out = os.path.join(work, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    datasets = sorted(d for d in os.listdir(src) if d.startswith("test_data_set_"))
    inputs = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    outputs = [o.name for o in model.graph.output]
    bf16_outputs = {o.name for o in model.graph.output
                    if o.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16}

    def input_files(dsdir):
        given = sorted((f for f in os.listdir(dsdir) if f.startswith("input_")), key=lambda f: int(f[6:-3]))
        return [(inputs[k], os.path.join(dsdir, f)) for k, f in enumerate(given) if k < len(inputs)]

    # A data set whose inputs contradict the shapes its model declares (ONNX
    # 1.12's CastLike bfloat16 tests give 'like' as [1], declared [3, 4]) is
    # not run: ONNX Runtime refuses such inputs too.
    declared = {i.name: [d.dim_value if d.HasField("dim_value") else None
                         for d in i.type.tensor_type.shape.dim]
                for i in model.graph.input if i.type.tensor_type.HasField("shape")}
    for ds in datasets:
        for input_name, file in input_files(os.path.join(src, ds)):
            dims = declared.get(input_name)
            if dims is None or None in dims:
                continue
            t = onnx.TensorProto()
            with open(file, "rb") as fh:
                t.ParseFromString(fh.read())
            if list(t.dims) != dims:
                return "invalid", op, f"{ds}: input '{input_name}' holds {list(t.dims)} but the model declares {dims}"

    compiled = os.path.join(out, "model.tt")
    agrees_with_ort = False
    status, detail = compile_model(tensortune, os.path.join(src, "model.onnx"), compiled, [])
    fixed_count = 0
    if status == "unsupported" and NEEDS_CONSTANT.search(detail) and datasets:
        # Fix the inputs after the first (then all) to the test's values, per data set.
        for count in (len(inputs) - 1, len(inputs)):
            if count <= 0:
                continue
            status, detail = compile_model(tensortune, os.path.join(src, "model.onnx"), compiled,
                                           input_files(os.path.join(src, datasets[0]))[len(inputs) - count:])
            fixed_count = count
            if status != "unsupported" or not NEEDS_CONSTANT.search(detail):
                break
    if status != "ok":
        return status, op, detail
    for ds in datasets:
        dsdir = os.path.join(src, ds)
        files = input_files(dsdir)
        if fixed_count and ds != datasets[0]:
            status, detail = compile_model(tensortune, os.path.join(src, "model.onnx"), compiled,
                                           files[len(inputs) - fixed_count:])
            if status != "ok":
                return status, op, f"{ds}: {detail}"
        args = [tensortune, "run", compiled, "--output-dir", os.path.join(out, ds), "--no-verify"]
        for input_name, file in files[:len(inputs) - fixed_count]:
            args += ["--input", f"{input_name}={file}"]
        try:
            r = subprocess.run(args, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            return "fail", op, f"{ds}: run timed out"
        if r.returncode != 0:
            return "fail", op, f"{ds}: run: " + (r.stderr.strip() or r.stdout.strip())[-400:]
        ort_verdict = None
        for k, f in enumerate(npy_names(outputs)):
            expected_file = os.path.join(dsdir, f"output_{k}.pb")
            if not os.path.exists(expected_file):
                continue
            t = onnx.TensorProto()
            with open(expected_file, "rb") as fh:
                t.ParseFromString(fh.read())
            expected = numpy_helper.to_array(t)
            if outputs[k] in bf16_outputs and expected.dtype == np.uint16:
                # ONNX's test data holds bfloat16 as its bits in uint16;
                # tensortune writes bfloat16 as float32, which holds it exactly.
                expected = (expected.astype(np.uint32) << 16).view(np.float32)
            ours = np.load(os.path.join(out, ds, f))
            why = close(ours, expected, bf16=outputs[k] in bf16_outputs)
            if why:
                # One ONNX Runtime run answers for every output of the data set.
                if ort_verdict is None:
                    ort_verdict = ort_agrees(os.path.join(src, "model.onnx"), files, os.path.join(out, ds),
                                             outputs, out, bf16_outputs)
                if ort_verdict:
                    why, agrees_with_ort = None, True
            if why:
                return "fail", op, f"{ds} output {outputs[k]}: {why}"
    shutil.rmtree(out, ignore_errors=True)
    notes = [f"{fixed_count} inputs fixed at compile time"] if fixed_count else []
    if agrees_with_ort:
        notes.append(ORT_NOTE)
    return "pass", op, "; ".join(notes)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tensortune", default=os.path.join(os.path.dirname(__file__), "..", "build", "tensortune"))
    ap.add_argument("--sample", type=int, default=0, help="a fixed sample of N tests (0: all)")
    ap.add_argument("--filter", default="", help="only tests whose name matches this regular expression")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", default="", help="write every test's result to this file")
    ap.add_argument("--work", default="", help="folder for the compiled models (default: a new temporary one)")
    ap.add_argument("--list-failed", action="store_true", help="print each failed test and why")
    ap.add_argument("--max-failed", type=int, default=-1,
                    help="exit 1 when more tests than this fail (a wrong answer or an error; -1: never)")
    args = ap.parse_args()
    if not os.path.isdir(DATA):
        sys.exit(f"{DATA} is missing: install Debian's libonnx-testdata")
    names = sorted(n for n in os.listdir(DATA) if re.search(args.filter, n))
    if args.sample and args.sample < len(names):
        step = len(names) / args.sample
        names = [names[int(i * step)] for i in range(args.sample)]
    work = args.work or tempfile.mkdtemp(prefix="tt_onnx_backend_")
    tensortune = os.path.abspath(args.tensortune)
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_test, n, tensortune, work): n for n in names}
        for f in concurrent.futures.as_completed(futures):
            results[futures[f]] = f.result()
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)

    by_op = {}
    for name, (status, op, _) in results.items():
        by_op.setdefault(op, {"pass": 0, "fail": 0, "unsupported": 0, "invalid": 0})[status] += 1
    print(f"{'operator':32} {'passed':>7} {'failed':>7} {'unsupported':>12}")
    for op in sorted(by_op):
        c = by_op[op]
        print(f"{op:32} {c['pass']:7} {c['fail']:7} {c['unsupported']:12}")
    total = {s: sum(1 for r in results.values() if r[0] == s) for s in ("pass", "fail", "unsupported", "invalid")}
    n = len(results)
    fixed = sum(1 for r in results.values() if r[0] == "pass" and "fixed" in r[2])
    by_ort = sum(1 for r in results.values() if r[0] == "pass" and ORT_NOTE in r[2])
    print(f"\n{n} tests: {total['pass']} passed ({100 * total['pass'] / max(n, 1):.1f}%; {fixed} of them "
          f"with inputs fixed at compile time, {by_ort} matching ONNX Runtime where ONNX's expected "
          f"output differs), {total['fail']} failed, {total['unsupported']} unsupported"
          + (f", {total['invalid']} not run (their data contradicts their model)" if total["invalid"] else ""))
    unsupported = sorted({op for op, c in by_op.items() if c["unsupported"]})
    if unsupported:
        print("operators with unsupported tests: " + ", ".join(unsupported))
    failed = args.max_failed >= 0 and total["fail"] > args.max_failed
    if args.list_failed or failed:
        for name in sorted(results):
            status, op, why = results[name]
            if status == "fail":
                print(f"FAILED {name} ({op}): {why}")
            if status == "invalid":
                print(f"NOT RUN {name} ({op}): {why}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({name: {"status": s, "operator": op, "detail": d} for name, (s, op, d) in results.items()},
                      fh, indent=1, sort_keys=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
