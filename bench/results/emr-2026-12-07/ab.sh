#!/bin/bash
# A/B of the pool change: KILN_AB_OLD=1 -> oneDNN f32 pool + direct (non-separable) code loop.
cd /work/main
K=build/kiln
for m in NONE; do
  for b in 1 8; do
    $K compile build/model-cache/$m.onnx --batch $b -o /tmp/s7/${m}_f32_b$b.kiln >/dev/null 2>&1
    $K compile build/model-cache/$m.onnx --batch $b --passes default+mixed_precision_bf16 -o /tmp/s7/${m}_bf16_b$b.kiln >/dev/null 2>&1
    $K compile build/model-cache/$m.onnx --batch $b --passes default+quantize_int8 --calibration-random 16 -o /tmp/s7/${m}_int8_b$b.kiln >/dev/null 2>&1
  done
done
printf "%-14s %5s %4s %3s | %9s %9s | %9s %9s  (pools ms, latency median ms; old / new, 3 alternations each)\n" model prec b thr old_pool new_pool old_lat new_lat
for m in googlenet squeezenet1_1 resnet18; do for p in f32 bf16 int8; do for b in 1 8; do for t in 1 2; do
  op=(); np=(); ol=(); nl=()
  for r in 1 2 3; do
    for e in old new; do
      if [ $e = old ]; then export KILN_AB_OLD=1; else unset KILN_AB_OLD; fi
      out=$(env -u OMP_WAIT_POLICY $K bench /tmp/s7/${m}_${p}_b$b.kiln --batch $b --threads $t --iters 20 --profile 2>&1)
      pool=$(echo "$out" | grep "x MaxPool on" | awk '{s+=$1} END {print s+0}')
      lat=$(echo "$out" | grep "latency:" | sed 's/.*median \([0-9.]*\) ms.*/\1/')
      if [ $e = old ]; then op+=($pool); ol+=($lat); else np+=($pool); nl+=($lat); fi
    done
  done
  med() { printf "%s\n" "$@" | sort -g | sed -n 2p; }
  printf "%-14s %5s %4s %3s | %9s %9s | %9s %9s\n" $m $p $b $t $(med ${op[@]}) $(med ${np[@]}) $(med ${ol[@]}) $(med ${nl[@]})
done; done; done; done
