#!/usr/bin/python3
# Dev-only: scores predictions against the measurements of an earlier kiln_perfmodel_eval run, so that a
# predictor or profile change can be judged on the same measurements without measuring again (a two-pass
# eval takes about 25 minutes on 2 vCPUs). Prints, per pass and against the lowest of the passes, the
# cases within +-10%, the median |error| and the split by precision and threads, then the lowest's misses.
# Usage: bench/perfmodel_rescore.py [--calibrate] EVAL_OUTPUT [PREDICT_ONLY_OUTPUT]
#   EVAL_OUTPUT: kiln_perfmodel_eval's output (any --passes, with or without --steps, --canary, --calibrate);
#   PREDICT_ONLY_OUTPUT: kiln_perfmodel_eval --predict-only's output: its predictions replace the run's own
#     (a --calibrate run's own are its uncalibrated ones);
#   --calibrate: each pass's prediction at the pace its compute canary read before the case ("canary x0.92":
#     kiln predict --calibrate's scaling), as kiln_perfmodel_eval --calibrate scores it; needs a --canary run
#     (a --canary run prints the reading to two decimals: a case at the band's edge can land either side).
import collections
import re
import sys

ROW = re.compile(r'^(\S+)\s+(\d+)\s+(fp32|bf16|int8)\s+(\d+)\s+([\d.]+)(?:\s+([\d.]+))?')
CANARY = re.compile(r'  canary x([\d.]+)')
UNCALIBRATED = re.compile(r'  uncalibrated ([\d.]+)')


def read_passes(path):
    """Per pass, key -> (prediction before any calibration, measured ms, compute canary's reading or None)."""
    passes = [{}]
    for line in open(path):
        if line.startswith('pass ') and ' of ' in line:
            passes.append({})
        if line.startswith('repeatability'):
            break
        m = ROW.match(line)
        if m and m.group(6):
            key = (m.group(1), int(m.group(2)), m.group(3), int(m.group(4)))
            canary, uncalibrated = CANARY.search(line), UNCALIBRATED.search(line)
            # A --calibrate run prints the prediction it scored and the uncalibrated one: their ratio is the
            # canary's exact reading (the printed "x0.92" is rounded, which moves cases at the band's edge).
            predicted = float(uncalibrated.group(1)) if uncalibrated else float(m.group(5))
            pace = float(m.group(5)) / predicted if uncalibrated and predicted > 0 else float(canary.group(1)) if canary else None
            passes[-1][key] = (predicted, float(m.group(6)), pace)
    return [p for p in passes if p]


def read_predictions(path):
    out = {}
    for line in open(path):
        m = ROW.match(line)
        if m and not m.group(6):
            out[(m.group(1), int(m.group(2)), m.group(3), int(m.group(4)))] = float(m.group(5))
    return out


def score(pred, measured, what, list_misses=False):
    within, n, errors, misses = 0, 0, [], []
    groups = collections.defaultdict(lambda: [0, 0])
    for key, ms in measured.items():
        if key not in pred:
            continue
        err = pred[key] / ms - 1
        ok = abs(err) <= 0.10
        if not ok:
            misses.append((key, pred[key], ms, err))
        within, n = within + ok, n + 1
        errors.append(abs(err))
        groups[(key[2], key[3])][0] += ok
        groups[(key[2], key[3])][1] += 1
    if not n:
        print("%-18s no case in common" % what)
        return
    errors.sort()
    split = "  ".join("%s t%d %d/%d" % (g[0], g[1], v[0], v[1]) for g, v in sorted(groups.items()))
    print("%-18s %d of %d within +-10%% (%.0f%%), median |error| %.1f%%   %s"
          % (what, within, n, 100.0 * within / n, 100 * errors[len(errors) // 2], split))
    if list_misses:
        for (model, batch, precision, threads), p, ms, err in sorted(misses, key=lambda m: m[3]):
            print("  miss %-18s b%-3d %s t%d  predicted %9.3f ms  measured %9.3f ms  %+6.1f%%"
                  % (model, batch, precision, threads, p, ms, 100 * err))


def main():
    args = sys.argv[1:]
    calibrate = "--calibrate" in args
    args = [a for a in args if a != "--calibrate"]
    if len(args) not in (1, 2):
        sys.exit("usage: perfmodel_rescore.py [--calibrate] EVAL_OUTPUT [PREDICT_ONLY_OUTPUT]")
    passes = read_passes(args[0])
    if not passes:
        sys.exit("%s: no measured cases" % args[0])
    base = {k: v[0] for k, v in passes[0].items()}
    if len(args) == 2:
        base = read_predictions(args[1])
    if calibrate and not any(v[2] for p in passes for v in p.values()):
        sys.exit("%s: no canary readings (a kiln_perfmodel_eval run without --canary)" % args[0])

    def predicted(pass_rows, key):
        canary = pass_rows[key][2] if calibrate else None
        return base[key] * canary if canary else base[key]

    for i, p in enumerate(passes):
        score({k: predicted(p, k) for k in p if k in base}, {k: v[1] for k, v in p.items()}, "pass %d" % (i + 1))
    if len(passes) > 1:
        common = set.intersection(*[set(p) for p in passes]) & set(base)
        # The lowest measurement is scored against its own pass's prediction (with --calibrate each pass has its own).
        lowest = {k: min(passes, key=lambda p: p[k][1]) for k in common}
        score({k: predicted(lowest[k], k) for k in common}, {k: lowest[k][k][1] for k in common}, "lowest of passes",
              list_misses=True)


main()
