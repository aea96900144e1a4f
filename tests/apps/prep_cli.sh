#!/usr/bin/env bash
# tessera-prep from the command line. Usage: prep_cli.sh CASE WORKDIR PREP H5DUMP LAUNCH...
# where LAUNCH is the mpirun command without -np. Bad-input cases must fail on every rank
# (the error printed once), exit non-zero, not hang, and print no HDF5 error stack.
set -u
case_name=$1 work=$2 prep=$3 h5dump=$4
shift 4
launch=("$@")
mkdir -p "$work"
dir=$(mktemp -d "$work/$case_name.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1

fail() { echo "prep_cli $case_name: $*"; exit 1; }
# A job's temporary output (PATH.tmp.HOST.PID) is there.
temp_left() { compgen -G "$1.tmp*" >/dev/null; }
run() {  # run NRANKS ARGS...: output in $out, status in $rc
  local n=$1
  shift
  out=$(timeout 120 "${launch[@]}" -np "$n" "$prep" "$@" 2>&1)
  rc=$?
}
expect_ok() {
  run "$@"
  [ "$rc" -eq 0 ] || { echo "$out"; fail "tessera-prep $* exited $rc"; }
}
# expect_error PATTERN ARGS...: at 3 ranks, one error line matching PATTERN.
expect_error() {
  local pattern=$1
  shift
  run 3 "$@"
  echo "$out"
  [ "$rc" -eq 124 ] && fail "hung (timeout)"
  [ "$rc" -eq 0 ] && fail "exited 0 on bad input"
  [ "$(echo "$out" | grep -c "^tessera-prep: error")" -eq 1 ] || fail "not exactly one error line"
  echo "$out" | grep "^tessera-prep: error" | grep -q -- "$pattern" ||
    fail "the error does not match '$pattern'"
  echo "$out" | grep -q "HDF5-DIAG" && fail "an HDF5 error stack leaked to the output"
  echo "$out" | grep -qiE "segmentation|signal [0-9]|core dumped|MPI_ABORT" && fail "crashed or aborted"
  echo "prep_cli $case_name: failed on every rank as it must (exit $rc)"
  exit 0
}
# float32 little-endian bytes of a small non-negative integer, as printf escapes.
f32() {
  local i=$1 bits=0
  if [ "$i" -gt 0 ]; then
    local e=0
    while [ $((1 << (e + 1))) -le "$i" ]; do e=$((e + 1)); done
    bits=$(((127 + e) << 23 | ((i - (1 << e)) << (23 - e))))
  fi
  printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((bits & 255)) $((bits >> 8 & 255)) $((bits >> 16 & 255)) $((bits >> 24 & 255))
}
# raw float32 file of the values 0..n-1
ramp() {
  local n=$1 file=$2 s=""
  for ((i = 0; i < n; i++)); do s+=$(f32 "$i"); done
  printf "$s" >"$file"
}
# .npy (version 1.0) holding the bytes of a raw file with the given descr and shape text
npy() {
  local raw=$1 descr=$2 shape=$3 file=$4
  local dict="{'descr': '$descr', 'fortran_order': False, 'shape': ($shape), }"
  local total=$((10 + ${#dict} + 1))
  local pad=$(((64 - total % 64) % 64))
  dict+=$(printf '%*s' "$pad" '')
  local len=$((${#dict} + 1))
  { printf '\x93NUMPY\x01\x00'; printf "\\x$(printf %02x $((len & 255)))\\x$(printf %02x $((len >> 8)))";
    printf '%s\n' "$dict"; cat "$raw"; } >"$file"
}
small_darcy() { expect_ok 2 generate darcy --grid 16x12 --samples 2 --seed 3 --out d.h5 --quiet; }

case $case_name in
  help)
    for c in "generate darcy" "generate heat" "generate points" convert inspect validate stats; do
      # shellcheck disable=SC2086
      expect_ok 1 $c --help
      echo "$out" | grep -q "^usage: tessera-prep" || fail "$c --help printed no usage"
    done
    expect_ok 1 --help
    echo "prep_cli help: every subcommand answers --help"
    ;;
  generate)
    expect_ok 3 generate darcy --grid 20x18 --samples 3 --seed 5 --out d3.h5 --quiet
    expect_ok 2 generate darcy --grid 20x18 --samples 3 --seed 5 --out d2.h5 --quiet
    expect_ok 1 generate heat --grid 10x9x8 --samples 2 --steps 20 --out h.h5 --quiet
    expect_ok 4 generate points --points 1001 --samples 2 --out p.h5 --quiet
    for f in d3.h5 d2.h5 h.h5 p.h5; do
      expect_ok 3 validate "$f" --quiet
      echo "$out" | grep -q "valid (schema version 1)" || fail "$f not reported valid"
    done
    # Same seed at 2 and 3 ranks: the permeability is bitwise identical.
    "$h5dump" -d /fields/permeability -b LE -o k3.bin d3.h5 >/dev/null
    "$h5dump" -d /fields/permeability -b LE -o k2.bin d2.h5 >/dev/null
    cmp k3.bin k2.bin || fail "permeability differs between 2 and 3 ranks"
    [ -s k3.bin ] || fail "h5dump wrote no permeability"
    expect_ok 3 stats d3.h5 --quiet
    "$h5dump" -a /fields/pressure/mean d3.h5 | grep -q "(0):" || fail "stats wrote no mean attribute"
    expect_ok 2 inspect p.h5 --quiet
    echo "$out" | grep -q "/points/coords  (2, 1001, 3) float32" || { echo "$out"; fail "inspect misreports points"; }
    echo "prep_cli generate: darcy, heat and points valid; k identical at 2 and 3 ranks; stats stored"
    ;;
  convert)
    ramp 48 a.raw
    expect_ok 3 convert a.raw --shape 2,1,4,6 --dtype float32 --out r.h5 --name u --quiet
    npy a.raw '<f4' '2, 1, 4, 6' a.npy
    expect_ok 2 convert a.npy --out n.h5 --name u --variables temp --quiet
    for f in r.h5 n.h5; do
      "$h5dump" -d /fields/u -y -w 0 -o "$f.txt" "$f" >/dev/null || fail "h5dump failed on $f"
      vals=$(tr ',' ' ' <"$f.txt")
      want=$(seq -s ' ' 0 47)
      [ "$(echo $vals)" = "$want" ] || fail "h5dump of $f gave '$vals'"
    done
    "$h5dump" -a /fields/u/variables n.h5 | grep -q '"temp"' || fail "variables attribute missing"
    expect_ok 3 validate n.h5 --dataset /fields/u --shape 2,1,4,6 --quiet
    echo "prep_cli convert: raw and .npy inputs read back by h5dump as written"
    ;;
  missing_file) expect_error "cannot open HDF5 file 'nope.h5': no such file" inspect nope.h5 ;;
  not_hdf5)
    echo "just text" >t.h5
    expect_error "'t.h5': not an HDF5 file" validate t.h5
    ;;
  truncated)
    small_darcy
    truncate -s $(($(stat -c %s d.h5) / 2)) d.h5
    expect_error "'d.h5': damaged or truncated HDF5 file: truncated file" inspect d.h5
    ;;
  missing_dataset)
    small_darcy
    expect_error "missing dataset '/fields/velocity' in 'd.h5'" validate d.h5 --dataset /fields/velocity
    ;;
  wrong_dtype)
    small_darcy
    expect_error "dataset '/fields/pressure' in 'd.h5' holds float32, expected float64" \
      validate d.h5 --dataset /fields/pressure --dtype float64 --no-values
    ;;
  wrong_rank)
    small_darcy
    expect_error "'/fields/pressure' in 'd.h5' has rank 4 (2, 1, 16, 12), expected rank 3" \
      validate d.h5 --dataset /fields/pressure --shape 2,16,12
    ;;
  wrong_shape)
    small_darcy
    # -1 matches any extent (as --help says); a wrong extent next to it is still found
    expect_ok 3 validate d.h5 --dataset /fields/pressure --shape 2,1,-1,12 --quiet
    expect_error "has shape (2, 1, 16, 12), expected (-1, 1, 16, 13) (dim 3 differs)" \
      validate d.h5 --dataset /fields/pressure --shape -1,1,16,13
    ;;
  nan)
    ramp 48 a.raw
    # value index 29 = (1, 0, 0, 5) in shape (2, 1, 4, 6) becomes NaN
    cp a.raw good.raw
    printf '\x00\x00\xc0\x7f' | dd of=a.raw bs=4 seek=29 conv=notrunc status=none
    # convert refuses it (on the rank that reads it) ...
    (expect_error "'a.raw': value nan at flat index 29 (sample 1) is not a finite float32" \
      convert a.raw --shape 2,1,4,6 --dtype float32 --out x.h5 --name u) || exit 1
    [ -e x.h5 ] && fail "convert left x.h5"
    # ... and validate finds one that h5py wrote
    expect_ok 2 convert good.raw --shape 2,1,4,6 --dtype float32 --out x.h5 --name u --quiet
    /usr/bin/python3 -c "import h5py; h5py.File('x.h5', 'r+')['/fields/u'][1, 0, 0, 5] = float('nan')" ||
      fail "h5py could not write the NaN"
    expect_error "dataset '/fields/u' in 'x.h5': non-finite value nan at index (1, 0, 0, 5)" validate x.h5
    ;;
  empty_grid) expect_error "--grid 0x5: every extent must be at least 1" generate darcy --grid 0x5 --out z.h5 ;;
  huge_grid)  # refused with numbers before any file is made (HDF5 crashed closing such a file)
    (expect_error "the Darcy solve needs about .* GiB per rank (.* cells of the grid (99999999, 99999999) on this rank)" \
      generate darcy --grid 99999999x99999999 --out z.h5) || exit 1
    [ -z "$(ls)" ] || fail "files were left: $(ls)"
    ;;
  convert_no_samples)  # what the schema refuses is refused before writing
    : >e.raw
    expect_error "has shape (0, 1, 4, 6): every extent must be at least 1 (no samples: --allow-empty" \
      convert e.raw --shape 0,1,4,6 --dtype float32 --out e.h5 --name u
    ;;
  convert_spatial_dims)
    ramp 16 a.raw
    expect_error "a field needs (N, C, spatial...) with 1 to 3 spatial dims" \
      convert a.raw --shape 1,1,2,2,2,2 --dtype float32 --out e.h5 --name u
    ;;
  convert_name)
    ramp 48 a.raw
    expect_error "--name 'a/b': a field name is one non-empty word without '/'" \
      convert a.raw --shape 2,1,4,6 --dtype float32 --out e.h5 --name a/b
    ;;
  convert_append_count)  # --append of another N or P: refused, the file left as it was
    ramp 48 a.raw
    ramp 72 b.raw
    expect_ok 1 convert a.raw --shape 2,1,4,6 --dtype float32 --out c.h5 --name u --quiet
    ramp 30 xyz.raw
    ramp 8 f.raw
    expect_ok 1 convert xyz.raw --kind coords --shape 2,5,3 --dtype float32 --out p.h5 --quiet
    before=$(sha256sum c.h5 p.h5)
    (expect_error "--append: 'c.h5' holds 2 samples (dataset '/fields/u'), 'b.raw' 3: every dataset of a file has the same N" \
      convert b.raw --shape 3,1,4,6 --dtype float32 --out c.h5 --name v --append) || exit 1
    (expect_error "--append: 'p.h5' holds 5 points per sample (dataset '/points/coords'), 'f.raw' 4: coords and features share P" \
      convert f.raw --kind features --shape 2,4,1 --dtype float32 --out p.h5 --append) || exit 1
    [ "$(sha256sum c.h5 p.h5)" = "$before" ] || fail "an appended-to file changed"
    temp_left c.h5 || temp_left p.h5 && fail "a temporary file was left"
    echo "prep_cli convert_append_count: refused, files unchanged"
    ;;
  convert_invalid)  # metadata and values the schema refuses: refused before writing them
    ramp 48 a.raw
    (expect_error "'/fields/u' in 'c.h5': spatial dim 0 has 4 nodes at spacing 0.500000, which span 1.500000, more than its extent 1.000000 (nothing written)" \
      convert a.raw --shape 2,1,4,6 --dtype float32 --out c.h5 --name u --spacing 0.5,0.5 --extent 1,1) || exit 1
    (expect_error "names 'a' twice" convert a.raw --shape 2,2,4,3 --dtype float32 --out c.h5 --name u \
      --variables a,a) || exit 1
    (expect_error "attribute 'extent' entry 0 is inf, must be finite and > 0" convert a.raw \
      --shape 2,1,4,6 --dtype float32 --out c.h5 --name u --extent inf,1 --spacing 0.1,0.1) || exit 1
    # float64 past float32's range: not stored as inf
    printf '\x00\x00\x00\x00\x00\x00\xf0\x3f%.0s' $(seq 47) >d.raw
    printf '\xa5\x5c\xc3\xf1\x29\x63\x3d\x48' >>d.raw  # 1e40
    (expect_error "'d.raw': value 1e+40 at flat index 47 (sample 1) is not a finite float32" \
      convert d.raw --shape 2,1,4,6 --dtype float64 --out c.h5 --name u) || exit 1
    [ -e c.h5 ] || temp_left c.h5 && fail "a file was left: $(ls)"
    # One of spacing and extent given: the other follows, and the file is valid.
    expect_ok 1 convert a.raw --shape 2,1,4,6 --dtype float32 --out s.h5 --name u --spacing 0.5,0.25 --quiet
    expect_ok 1 validate s.h5 --quiet
    "$h5dump" -a /fields/u/extent s.h5 | grep -q "2, 1.5" || fail "extent not derived from the spacing"
    expect_ok 1 convert a.raw --shape 2,1,4,6 --dtype float32 --out e.h5 --name u --extent 2,3 --quiet
    "$h5dump" -a /fields/u/spacing e.h5 | grep -q "0.5, 0.5" || fail "spacing not derived from the extent"
    echo "prep_cli convert_invalid: refused, derived"
    ;;
  generate_params)  # physical parameters: finite and in range, refused before any file
    for bad in "heat --alpha nan" "heat --alpha 0" "heat --alpha -1" "darcy --tol 0" \
      "darcy --sigma nan" "darcy --sigma -1" "points --noise nan" "points --noise -1"; do
      set -- $bad
      size=(--grid 5x5)
      [ "$1" = points ] && size=(--points 20)
      (expect_error "option $2 $3: must be a finite number" generate $1 "${size[@]}" $2 $3 \
        --out g.h5) 2>&1 | tail -1 | grep -q "as it must" || fail "generate $bad was not refused"
    done
    [ -z "$(ls)" ] || fail "files were left: $(ls)"
    echo "prep_cli generate_params: refused"
    ;;
  generate_disk)  # a dataset past the file system's free space: refused before it fills it
    (expect_error "of shape (999999999999, 1, 4, 4) needs .* GiB, the file system has .* GiB free" \
      generate heat --grid 4x4 --samples 999999999999 --out h.h5) || exit 1
    [ -z "$(ls)" ] || fail "files were left: $(ls)"
    ;;
  stats_invalid)  # a file that fails the schema (its nodes span more than the extent)
    ramp 48 a.raw
    expect_ok 1 convert a.raw --shape 2,1,4,6 --dtype float32 --out c.h5 --name u --quiet
    # convert refuses such metadata: h5py writes it
    /usr/bin/python3 -c "import h5py, numpy as np; h5py.File('c.h5', 'r+')['/fields/u'].attrs.modify('spacing', np.array([1.0, 1.0]))" ||
      fail "h5py could not set the attribute"
    run 3 validate c.h5 --quiet
    [ "$rc" -ne 0 ] || fail "validate accepted spacing 1 for 4 nodes in an extent of 1"
    expect_error "spatial dim 0 has 4 nodes at spacing 1.000000, which span 3.000000, more than its extent" \
      stats c.h5
    ;;
  *) fail "unknown case" ;;
esac
