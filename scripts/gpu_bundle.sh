#!/usr/bin/env bash
# Packs what a GPU machine without Debian's packages needs to run kiln's CUDA checks
# (bench/gpu_session.sh): build/kiln, build/kiln-runtime, build/libkiln_cuda.so, the GPU test
# executable and the input-copy benchmark, their shared-library closure except glibc and the CUDA libraries (the GPU machine's
# own cuDNN/cuBLASLt/driver are used), and the Fashion-MNIST test set. One xz tarball, small enough
# to travel with the working tree. Usage: scripts/gpu_bundle.sh [OUT.tar.xz]  (default .gpu/bundle.tar.xz)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.gpu/bundle.tar.xz}
binaries=(build/kiln build/kiln-runtime build/libkiln_cuda.so build/tests/cuda/kiln_cuda_gpu_tests build/bench/kiln_chunked_copy_bench)
for b in "${binaries[@]}"; do
  [ -f "$b" ] || { echo "gpu_bundle: $b is missing: build with the CUDA Toolkit first (scripts/setup.sh)" >&2; exit 1; }
done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build/tests/cuda" "$stage/build/bench" "$stage/lib" "$stage/lib-cxx" "$stage/data"
for b in "${binaries[@]}"; do cp "$b" "$stage/$b"; done
# glibc's own libraries come from the GPU machine; libstdc++/libgcc_s go aside (lib-cxx), used
# there only when its own are older than this machine's; CUDA libraries are the GPU machine's.
ldd "${binaries[@]}" 2>/dev/null | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
  case "$name" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libresolv.so*|libutil.so*) ;;
    libcuda.so*|libcudart.so*|libcublas*|libcudnn*|libnvrtc*|libnvJitLink*) ;;
    libstdc++.so*|libgcc_s.so*) cp -L "$path" "$stage/lib-cxx/$name" ;;
    *) cp -L "$path" "$stage/lib/$name" ;;
  esac
done
for f in t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  [ -f "/usr/share/datasets/fashion-mnist/$f" ] && cp "/usr/share/datasets/fashion-mnist/$f" "$stage/data/"
done
mkdir -p "$(dirname "$out")"
tar -C "$stage" -cf - . | xz -T0 -6 >"$out"
echo "gpu_bundle: $out $(du -h "$out" | cut -f1) ($(ls "$stage/lib" | wc -l) libraries)"
