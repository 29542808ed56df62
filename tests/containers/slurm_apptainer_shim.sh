#!/usr/bin/env bash
# A stand-in for `apptainer` (not packaged in Debian 12), installed by slurm_test.sh as
# `apptainer` first on the job's PATH. It implements exactly what job.slurm uses:
#   apptainer build SIF oci-archive://ARCHIVE
#       unpacks ARCHIVE with `umoci unpack` (which checks every layer against its diff_id) into
#       a rootfs folder named by the archive's sha256 (DIR/.apptainer-shim/SHA256, beside the
#       SIF), then writes SIF as a small text file naming that folder: a regular file, so
#       job.slurm's `[[ -f $SIF ]]` reuse test and its tmp-then-rename both behave as with a real SIF.
#   apptainer exec [--cleanenv] [--nv] [--env K=V[,K=V...]] [--bind SRC[:DST]]... SIF CMD ARGS...
#       in a private mount namespace (unshare -m), bind-mounts each SRC at DST (default SRC)
#       inside the rootfs, then runs CMD there with chroot as the image's user 65532:65532,
#       with the image's Env (from its config), then the --env values.
# Limits, on purpose (this checks the job script's flow, not Apptainer):
#   - needs root (unshare, mount, chroot); runs CMD as 65532, not as the caller like Apptainer,
#     so bound folders must be readable (and, for output, writable) by uid 65532;
#   - no /proc, /dev, /sys, $HOME, /tmp or current-folder mounts, no --nv GPU libraries (--nv is
#     accepted and ignored), no bind options (SRC:DST:ro), no overlay/writable SIF;
#   - the "SIF" is only valid on this machine (it names a folder), and the rootfs is shared
#     by every exec of it (bind mount points are created in it);
#   - any other subcommand or option fails with exit 2 and names it, so a change in job.slurm
#     shows up here instead of being ignored.
# APPTAINER_SHIM_LOG, when set, is a file each call appends one line to: its arguments and the
# CUDA_VISIBLE_DEVICES it was given (what --nv would pass on); the test counts builds and GPUs.
set -euo pipefail

die() { echo "apptainer (kiln test shim): $*" >&2; exit 2; }
[ -n "${APPTAINER_SHIM_LOG:-}" ] && echo "$* CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}" >> "$APPTAINER_SHIM_LOG"
[ $# -ge 1 ] || die "usage: apptainer build SIF oci-archive://ARCHIVE | exec [options] SIF CMD ARGS..."
cmd=$1
shift

case "$cmd" in
  build)
    [ $# -eq 2 ] || die "build takes exactly SIF and oci-archive://ARCHIVE, got: $*"
    dst=$1 src=$2
    [[ "$src" == oci-archive://* ]] || die "build: only oci-archive:// sources are supported, got '$src'"
    archive=${src#oci-archive://}
    [ -f "$archive" ] || die "build: no such archive '$archive'"
    sha=$(sha256sum "$archive" | cut -d' ' -f1)
    store="$(cd "$(dirname "$dst")" && pwd)/.apptainer-shim"
    root="$store/$sha"
    if [ ! -d "$root/rootfs" ]; then
      mkdir -p "$store"
      tmp=$(mktemp -d "$store/tmp.XXXXXX")
      mkdir -p "$tmp/layout"
      tar -xf "$archive" -C "$tmp/layout"
      tag=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"])' \
        "$tmp/layout/index.json")
      umoci unpack --image "$tmp/layout:$tag" "$tmp/bundle" > "$tmp/umoci.log" 2>&1 || { cat "$tmp/umoci.log" >&2; die "build: umoci unpack failed"; }
      # The image's Env, one per line, for exec.
      python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["process"].get("env", [])))' \
        "$tmp/bundle/config.json" > "$tmp/bundle/env"
      mv -T "$tmp/bundle" "$root" 2> /dev/null || [ -d "$root/rootfs" ] || die "build: could not store the rootfs"
      rm -rf "$tmp"
    fi
    printf 'kiln-apptainer-shim-sif %s\n' "$root" > "$dst"
    echo "apptainer (kiln test shim): built $dst from $archive"
    ;;
  exec)
    cleanenv=0 envs=() binds=()
    while [ $# -gt 0 ]; do
      case "$1" in
        --cleanenv) cleanenv=1 ;;
        --nv) ;;
        --env) [ $# -ge 2 ] || die "--env needs a value"; envs+=("$2"); shift ;;
        --env=*) envs+=("${1#--env=}") ;;
        --bind) [ $# -ge 2 ] || die "--bind needs a value"; binds+=("$2"); shift ;;
        --bind=*) binds+=("${1#--bind=}") ;;
        -*) die "exec: unsupported option '$1'" ;;
        *) break ;;
      esac
      shift
    done
    [ $# -ge 2 ] || die "exec needs SIF and CMD"
    sif=$1
    shift
    read -r magic root < "$sif" || die "exec: cannot read '$sif'"
    [ "$magic" = kiln-apptainer-shim-sif ] && [ -d "$root/rootfs" ] || die "exec: '$sif' was not built by this shim"
    rootfs="$root/rootfs"

    # The environment: the caller's unless --cleanenv, then the image's, then --env (K=V,K=V).
    env_args=()
    [ "$cleanenv" = 1 ] && env_args+=(-i)
    while IFS= read -r kv; do [ -n "$kv" ] && env_args+=("$kv"); done < "$root/env"
    for list in "${envs[@]}"; do
      IFS=, read -r -a kvs <<< "$list"
      for kv in "${kvs[@]}"; do
        [[ "$kv" == *=* ]] || die "exec: --env '$kv' is not KEY=VALUE"
        env_args+=("$kv")
      done
    done

    # Bind mounts in a namespace of our own: they vanish with the command, whatever happens.
    mounts=""
    for b in "${binds[@]}"; do
      IFS=: read -r -a parts <<< "$b"
      [ "${#parts[@]}" -le 2 ] || die "exec: bind options are not supported: '$b'"
      bsrc=${parts[0]} bdst=${parts[1]:-${parts[0]}}
      [ -d "$bsrc" ] || die "exec: bind source '$bsrc' is not a folder"
      [[ "$bdst" == /* ]] || die "exec: bind destination '$bdst' is not absolute"
      mkdir -p "$rootfs$bdst"
      mounts+="mount --bind $(printf '%q' "$bsrc") $(printf '%q' "$rootfs$bdst") && "
    done
    chroot=$(command -v chroot) || die "exec: chroot is not installed"
    env_words=""
    [ "${#env_args[@]}" -gt 0 ] && env_words=$(printf '%q ' "${env_args[@]}")
    exec unshare --mount --propagation private -- bash -c \
      "${mounts}exec env ${env_words}$(printf '%q' "$chroot") --userspec=65532:65532 $(printf '%q' "$rootfs") $(printf '%q ' "$@")"
    ;;
  *) die "unsupported subcommand '$cmd'" ;;
esac
