#!/usr/bin/env bash
# tessera-prep from the command line. Usage: prep_cli.sh CASE WORKDIR PREP H5DUMP LAUNCH...
# where LAUNCH is the mpirun command without -np. Bad-input cases must fail on every rank
# (the error printed once), exit non-zero, not hang, and print no HDF5 error stack.
set -u
case_name=$1 work=$2 prep=$3 h5dump=$4
shift 4
launch=("$@")
# shellcheck source=tests/apps/workdir.sh
source "$(dirname "$0")/workdir.sh"
enter_workdir "$work" "$case_name"

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
    # More neighbours than points would average all of them under a false @smooth.
    (expect_error "--smooth 6 neighbours of a cloud of 5 points" generate points --points 5 \
      --samples 1 --smooth 6 --out p5.h5) || exit 1
    # The generators' parameters are in the file: another --modes is another dataset.
    expect_ok 1 generate darcy --grid 8x8 --samples 1 --modes 2 --out dm.h5 --quiet
    run 1 generate darcy --grid 8x8 --modes 10000 --out dm2.h5
    echo "$out" | grep -q "^tessera-prep: error: --modes 10000: at most 64, the grid's largest extent or 64" ||
      { echo "$out"; fail "--modes 10000 on an 8x8 grid was not refused"; }
    "$h5dump" -a /modes dm.h5 | grep -q "(0): 2" || fail "generate darcy did not record --modes"
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
    expect_ok 2 validate d3.h5 --quiet  # its statistics describe its data, at another rank count
    # --dataset as HDF5 reads paths: without the leading '/' too (the channel dim from the
    # whole path: it had taken a field for points and written statistics that broke the file).
    expect_ok 2 stats d3.h5 --dataset fields/pressure --quiet
    expect_ok 2 stats d3.h5 --dataset //fields//permeability/ --quiet
    expect_ok 2 validate d3.h5 --quiet
    # Values changed after stats: the stored statistics no longer describe them.
    /usr/bin/python3 -c "
import h5py
with h5py.File('d3.h5', 'r+') as f:
    u = f['fields/pressure']
    u[...] = u[...] * 100 + 50
" || fail "h5py could not rescale d3.h5"
    (expect_error "/fields/pressure' in 'd3.h5': channel 0 statistics do not describe the data" \
      validate d3.h5) || exit 1
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
  convert_layouts)  # Fortran order, big-endian, several inputs, --stack: numpy's values at 1 and 3 ranks
    /usr/bin/python3 -c "
import numpy as np
a = np.random.default_rng(1).standard_normal((5, 2, 7, 6))
np.save('ref.npy', a)
np.save('c.npy', a)
np.save('f.npy', np.asfortranarray(a))
np.save('bef.npy', np.asfortranarray(a.astype('>f8')))
np.save('be.npy', a.astype('>f4'))
np.asfortranarray(a).T.tofile('f.raw')
a.astype('>f4').tofile('be.raw')
for i in range(5): np.save('s%d.npy' % i, np.asfortranarray(a[i]) if i % 2 else a[i])
np.save('p1.npy', a[:2]); np.save('p2.npy', np.asfortranarray(a[2:]))
x = np.random.default_rng(2).standard_normal((3, 11, 3))
np.save('xref.npy', x); np.save('fx.npy', np.asfortranarray(x))
n = np.asfortranarray(a.copy()); n[2, 1, 3, 4] = np.nan; np.save('fn.npy', n)
np.save('h.npy', a.astype('<f2'))
t = np.random.default_rng(3).standard_normal((4, 3, 5, 2))  # 2 columns of the split dim
np.save('tref.npy', t); np.save('ft.npy', np.asfortranarray(t))
np.save('z.npy', np.asfortranarray(np.zeros((0, 3, 5, 2))))" || fail "numpy could not write the inputs"
    for n in 1 3; do
      # Pieces of 512 bytes: the Fortran-order inputs read one column of the split dim at a time.
      export TESSERA_IO_PIECE_BYTES=512
      expect_ok $n convert c.npy --out c$n.h5 --quiet
      expect_ok $n convert f.npy --out f$n.h5 --quiet
      expect_ok $n convert bef.npy --out bef$n.h5 --quiet
      expect_ok $n convert be.npy --out be$n.h5 --quiet
      expect_ok $n convert f.raw --shape 5,2,7,6 --dtype float64 --order F --out fraw$n.h5 --quiet
      expect_ok $n convert be.raw --shape 5,2,7,6 --dtype float32 --byte-order big --out beraw$n.h5 --quiet
      expect_ok $n convert s0.npy s1.npy s2.npy s3.npy s4.npy --stack --out stack$n.h5 --quiet
      expect_ok $n convert p1.npy p2.npy --out joined$n.h5 --quiet
      expect_ok $n convert fx.npy --kind coords --out fx$n.h5 --quiet
      unset TESSERA_IO_PIECE_BYTES
    done
    # More ranks than columns (a rank with none writes empty boxes), one column a piece, and
    # an input of no samples joined with it.
    TESSERA_IO_PIECE_BYTES=8 expect_ok 3 convert z.npy ft.npy --out ft3.h5 --quiet
    /usr/bin/python3 -c "
import glob, sys, h5py, numpy as np
a = np.load('ref.npy').astype(np.float32)
x = np.load('xref.npy').astype(np.float32)
t = np.load('tref.npy').astype(np.float32)
files = sorted(glob.glob('*.h5'))
for name in files:
    with h5py.File(name, 'r') as f:
        got, want = ((f['/points/coords'][...], x) if name.startswith('fx') else
                     (f['/fields/u'][...], t if name.startswith('ft') else a))
    if got.shape != want.shape or not np.array_equal(got, want):
        sys.exit('%s: not the values numpy saved' % name)
print('%d files equal numpy' % len(files))" || fail "a converted file differs from numpy's array"
    (expect_error "'fn.npy': value nan at flat index 317 (Fortran order, sample 2) is not a finite float32" \
      convert fn.npy --out n.h5) || exit 1
    (expect_error "'s0.npy' has shape (2, 7, 6), 'c.npy' (5, 2, 7, 6): the inputs' samples are joined, so every extent after N must agree (files of one sample each, without N: --stack)" \
      convert c.npy s0.npy --out n.h5 --name u) || exit 1
    (expect_error "'h.npy': dtype '<f2' not supported (float32 or float64, either byte order)" \
      convert h.npy --out n.h5) || exit 1
    (expect_error "--byte-order little contradicts 'be.npy', whose .npy header says '>f4'" \
      convert be.npy --byte-order little --out n.h5) || exit 1
    (expect_error "--order C contradicts 'f.npy', whose .npy header says fortran_order True" \
      convert f.npy --order C --out n.h5) || exit 1
    (expect_error "--order X: C (row-major) or F (column-major, Fortran)" \
      convert f.raw --shape 5,2,7,6 --dtype float64 --order X --out n.h5) || exit 1
    [ -e n.h5 ] && fail "a refused convert left n.h5"
    echo "prep_cli convert_layouts: every layout equals numpy's array; refusals said"
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
    # A feature named "coords" could never be chosen (it names /points/coords).
    ramp 10 g.raw
    (expect_error "--variables: 'coords' is the name of /points/coords" \
      convert g.raw --kind features --shape 2,5,1 --dtype float32 --variables coords \
      --out p.h5 --append) || exit 1
    [ "$(sha256sum c.h5 p.h5)" = "$before" ] || fail "an appended-to file changed"
    temp_left c.h5 || temp_left p.h5 && fail "a temporary file was left"
    # ... and a file naming one so (h5py writes it) does not validate.
    expect_ok 1 convert g.raw --kind features --shape 2,5,1 --dtype float32 --variables g \
      --out p.h5 --append --quiet
    /usr/bin/python3 -c "import h5py; h5py.File('p.h5', 'r+')['/points/features'].attrs['variables'] = ['coords']" ||
      fail "h5py could not set the attribute"
    (expect_error "attribute 'variables' names 'coords', the name of /points/coords" \
      validate p.h5) || exit 1
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
    # A seed is 0 to 2^63 - 1; a noise that puts points past float32 is said as such.
    for bad in "--seed -1|option --seed -1: must lie in \\[0, 9223372036854775807\\]" \
      "--seed 18446744073709551614|option --seed 18446744073709551614 is out of range" \
      "--noise 1e300|--noise 1e300: points of sample 0 leave float32's range"; do
      (expect_error "${bad#*|}" generate points --points 20 ${bad%%|*} --out g.h5) 2>&1 |
        tail -1 | grep -q "as it must" || fail "generate points ${bad%%|*} was not refused"
    done
    [ -z "$(ls)" ] || fail "files were left: $(ls)"
    echo "prep_cli generate_params: refused"
    ;;
  generate_disk)  # a dataset past the file system's free space: refused before it fills it
    (expect_error "of shape (999999999999, 1, 4, 4) needs .* [KMG]iB, the file system has .* [KMG]iB free" \
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
  npy_dtype)  # a structured dtype (a record of named fields): refused naming the file
    /usr/bin/python3 -c "import numpy as np; np.save('s.npy', np.zeros(3, dtype=[('a', 'f4'), ('b', 'i4')]))" ||
      fail "numpy could not write s.npy"
    expect_error "'s.npy': structured dtype (a record of named fields) not supported" \
      convert s.npy --out s.h5
    ;;
  npy_shape)  # negative and overflowing extents, --shape/--dtype contradicting the header
    ramp 192 b.raw  # 768 bytes: (3, 1, 8, 8) float32
    npy b.raw '<f4' '-3, 1, 8, 8' neg.npy
    (expect_error "'neg.npy': .npy header shape (-3, 1, 8, 8) has a negative extent -3" \
      convert neg.npy --out n.h5) || exit 1
    npy b.raw '<f4' '3, 1, -8, 8' neg2.npy
    (expect_error "has a negative extent -8" convert neg2.npy --out n.h5) || exit 1
    # A key given twice: numpy reads the last, so neither is taken.
    npy b.raw '<f4' "3, 1, 8, 8), 'shape': (3, 1, 4, 16" twice.npy
    (expect_error "'twice.npy': .npy header gives 'shape' twice" convert twice.npy --out n.h5) || exit 1
    npy b.raw '<f4' '4611686018427387904, 4, 8, 8' big.npy
    (expect_error "'big.npy': shape (4611686018427387904, 4, 8, 8) of 4-byte values would need more than 2^63 bytes" \
      convert big.npy --out n.h5) || exit 1
    npy b.raw '<f4' '3, 1, 8, 8' ok.npy
    (expect_error "--shape 3,1,64 contradicts 'ok.npy', whose .npy header says (3, 1, 8, 8)" \
      convert ok.npy --shape 3,1,64 --out n.h5) || exit 1
    (expect_error "--dtype float64 contradicts 'ok.npy', whose .npy header says '<f4'" \
      convert ok.npy --dtype float64 --out n.h5) || exit 1
    [ -e n.h5 ] && fail "a refused convert left n.h5"
    expect_ok 2 convert ok.npy --shape 3,1,8,8 --dtype float32 --out n.h5 --quiet  # agreeing
    echo "prep_cli npy_shape: refused; agreeing --shape/--dtype pass"
    ;;
  darcy_sigma)  # CG's advice: overflowing k, then a residual that stopped falling
    (expect_error "the permeability k = exp(sigma g) leaves double precision at --sigma 1000 .*give a smaller --sigma" \
      generate darcy --grid 8x8 --sigma 1000 --out g.h5) || exit 1
    run 3 generate darcy --grid 16x16 --sigma 30 --out g.h5
    echo "$out" | grep "^tessera-prep: error" | grep -q "more iterations (--max-iter) will not help; the system is too ill-conditioned at this sigma: give a smaller --sigma" ||
      { echo "$out"; fail "sigma 30: no ill-conditioning said"; }
    run 3 generate darcy --grid 16x16 --sigma 2 --max-iter 60 --out g.h5
    echo "$out" | grep "^tessera-prep: error" | grep -q "still falling: raise --max-iter" ||
      { echo "$out"; fail "a falling residual: --max-iter not suggested"; }
    [ -z "$(ls)" ] || fail "files were left: $(ls)"
    echo "prep_cli darcy_sigma: overflow and ill-conditioning said, --max-iter only while falling"
    ;;
  huge_sample)  # declared huge and never written: schema problems first, no allocation
    /usr/bin/python3 -c "
import h5py, numpy as np
with h5py.File('h.h5', 'w') as f:
    f.attrs['tessera_schema_version'] = np.int64(1)
    f.create_dataset('/fields/u', shape=(2, 1, 400000, 400000), dtype='f4', chunks=(1, 1, 1000, 1000))
with h5py.File('n.h5', 'w') as f:
    f.attrs['tessera_schema_version'] = np.int64(1)
    d = f.create_dataset('/fields/u', shape=(10**12, 1, 4, 4), dtype='f4', chunks=(1, 1, 4, 4))
    d.attrs['variables'] = ['u']; d.attrs['spacing'] = [0.25, 0.25]; d.attrs['extent'] = [1.0, 1.0]
" || fail "h5py could not write the files"
    size=$(stat -c %s h.h5)
    run 3 validate h.h5
    echo "$out" | grep -q "^invalid: dataset '/fields/u' in 'h.h5': missing attribute 'variables'" ||
      { echo "$out"; fail "schema problems not listed"; }
    echo "$out" | grep -q "^invalid: dataset '/fields/u' in 'h.h5' holds no written data" ||
      { echo "$out"; fail "unallocated not said"; }
    run 3 inspect h.h5 --quiet
    [ "$rc" -eq 0 ] && echo "$out" | grep -q "no statistics: dataset '/fields/u' in 'h.h5' holds no written data" ||
      { echo "$out"; fail "inspect of h.h5"; }
    /usr/bin/python3 -c "
import h5py, numpy as np
with h5py.File('ints.h5', 'w') as f:
    f['fields/i'] = np.zeros((2, 1, 4, 4), np.int32)
" || fail "h5py could not write ints.h5"
    run 2 inspect ints.h5 --quiet
    [ "$rc" -eq 0 ] && echo "$out" | grep -q "no statistics: element type int32" ||
      { echo "$out"; fail "inspect did not say why an int32 dataset has no statistics"; }
    (expect_error "dataset '/fields/u' in 'n.h5' holds no written data (its storage was never allocated" \
      validate n.h5) || exit 1
    (expect_error "'/fields/u' in 'h.h5'" stats h.h5) || exit 1
    [ "$(stat -c %s h.h5)" = "$size" ] || fail "h.h5 changed size: storage was allocated"
    echo "prep_cli huge_sample: reported, nothing allocated"
    ;;
  stats_pieces)  # stats/inspect/validate read a sample in bounded pieces (TESSERA_IO_PIECE_BYTES
    # forces small ones): at 1-4 ranks the same min, max, mean and first non-finite index as
    # each rank's share read whole (std to 1e-12), and numpy's; a NaN at a piece's first value
    /usr/bin/python3 -c "
import h5py, numpy as np
rng = np.random.default_rng(5)
u = (1000 + 3 * rng.standard_normal((3, 2, 37, 29))).astype('f4')
def fields(f, u):
    f.attrs['tessera_schema_version'] = np.int64(1)
    d = f.create_dataset('/fields/u', data=u, chunks=(1, 1, 10, 29))
    d.attrs['variables'] = ['a', 'b'][:u.shape[1]]; d.attrs['extent'] = [1.0, 1.0]
    d.attrs['spacing'] = [1 / (n - 1) for n in u.shape[2:]]
with h5py.File('s.h5', 'w') as f:
    fields(f, u)
    f.create_dataset('/points/coords', data=rng.random((3, 101, 3)).astype('f4'))
    p = f.create_dataset('/points/features', data=(rng.standard_normal((3, 101, 2)) * [1, 1e4]).astype('f4'))
    p.attrs['variables'] = ['x', 'y']
u[1, 1, 20, 0] = np.nan  # the first value of a row: of a piece of 116 bytes (a row) or 12
u[2, 0, 0, 0] = np.inf
with h5py.File('nan.h5', 'w') as f:
    fields(f, u)
# one sample of 144 MB: 2 pieces of the default 64 MiB per rank at 2 ranks
with h5py.File('big.h5', 'w') as f:
    fields(f, (-5 + 0.5 * rng.standard_normal((1, 1, 6000, 6000))).astype('f4'))
" || fail "h5py could not write the files"
    # 1 and 3 ranks (one whole share, and uneven shares) keep the suite's time in bounds.
    for n in 1 3; do
      for p in "" 4 116; do
        cp s.h5 "s-$n-$p.h5"
        TESSERA_IO_PIECE_BYTES=$p expect_ok "$n" stats "s-$n-$p.h5" --quiet
      done
      for p in 12 116; do
        TESSERA_IO_PIECE_BYTES=$p run "$n" inspect nan.h5 --quiet
        echo "$out" | grep -q "^/fields/u  (3, 2, 37, 29) float32" &&
          echo "$out" | grep -q "first non-finite value nan at (1, 1, 20, 0)$" ||
          { echo "$out"; fail "inspect at $n ranks, pieces '$p': not the NaN at (1, 1, 20, 0)"; }
        TESSERA_IO_PIECE_BYTES=$p run "$n" validate nan.h5
        [ "$rc" -ne 0 ] && echo "$out" | grep -q "^tessera-prep: error: dataset '/fields/u' in 'nan.h5': non-finite value nan at index (1, 1, 20, 0) " ||
          { echo "$out"; fail "validate at $n ranks, pieces '$p': not the NaN at (1, 1, 20, 0)"; }
      done
    done
    # Progress by piece: /fields/u in rows of 116 bytes, 74 a sample, 222 in all.
    TESSERA_IO_PIECE_BYTES=116 expect_ok 1 validate s.h5
    echo "$out" | grep -q "^\[validate /fields/u\] 222/222, " || { echo "$out"; fail "no progress by piece"; }
    cp big.h5 big-2-.h5
    expect_ok 2 stats big-2-.h5 --quiet
    /usr/bin/python3 -c "
import h5py, math, numpy as np
def ref(x, cdim):  # per channel: numpy's exact mean (fsum), std, min, max, count
    x = np.moveaxis(x.astype(np.float64), cdim, 0).reshape(x.shape[cdim], -1)
    mean = [math.fsum(r) / r.size for r in x]
    std = [math.sqrt(math.fsum((r - m) ** 2) / r.size) for r, m in zip(x, mean)]
    return mean, std, list(x.min(1)), list(x.max(1)), x.shape[1]
def close(a, b, tol=1e-12):
    return all(abs(p - q) <= tol * max(abs(q), 1e-300) for p, q in zip(a, b))
bad = []
def check(files, src, dsets, tol):
    with h5py.File(src, 'r') as f:
        want = {d: ref(f[d][...], 1 if d.startswith('/fields/') else 2) for d in dsets}
    whole = {}
    for name in files:
        with h5py.File(name, 'r') as f:
            for d in dsets:
                a = f[d].attrs
                got = [list(a[k]) for k in ('mean', 'std', 'min', 'max')] + [int(a['stats_count'])]
                m, s, lo, hi, cnt = want[d]
                if not (close(got[0], m, tol) and close(got[1], s, tol) and got[2] == lo and got[3] == hi and got[4] == cnt):
                    bad.append(f'{name} {d}: {got} against numpy {want[d]}')
                n = name.split('-')[1]
                if name.endswith('-.h5'):
                    whole[n, d] = got
                elif (n, d) in whole:
                    w = whole[n, d]
                    if got[0] != w[0] or got[2:] != w[2:] or not close(got[1], w[1]):
                        bad.append(f'{name} {d}: {got} differs from the whole-share {w}')
check([f's-{n}-{p}.h5' for n in (1, 3) for p in ('', 4, 116)], 's.h5',
      ['/fields/u', '/points/coords', '/points/features'], 1e-12)
# 36 million values summed one after the other: rounding of order sqrt(n) eps against fsum
check(['big-2-.h5'], 'big.h5', ['/fields/u'], 1e-10)
print('\n'.join(bad))
exit(1 if bad else 0)
" || fail "statistics differ (above)"
    (TESSERA_IO_PIECE_BYTES=1e6 expect_error "TESSERA_IO_PIECE_BYTES='1e6' is not a whole number" stats s.h5) || exit 1
    echo "prep_cli stats_pieces: streamed statistics equal the whole-share ones and numpy's at 1-3 ranks"
    ;;
  missing_filter)  # a compression this HDF5 lacks: the dataset and the filter named
    /usr/bin/python3 -c "
import h5py, numpy as np
with h5py.File('z.h5', 'w') as f:
    f.attrs['tessera_schema_version'] = np.int64(1)
    d = f.create_dataset('/fields/u', data=np.ones((2, 1, 10, 40), 'f4'), chunks=(1, 1, 10, 40), compression='lzf', shuffle=True)
    d.attrs['variables'] = ['u']; d.attrs['spacing'] = [0.1, 0.025]; d.attrs['extent'] = [1.0, 1.0]
" || fail "h5py could not write z.h5"
    expect_error "dataset '/fields/u' in 'z.h5' is stored with filter 'lzf' (id 32000), which this HDF5 does not have" \
      validate z.h5
    ;;
  links)  # a dangling soft link, an external link to a missing file, a group: each a problem
    small_darcy
    for k in soft external group; do cp d.h5 "$k.h5"; done
    /usr/bin/python3 -c "
import h5py
for k in ('soft', 'external', 'group'):
    with h5py.File(k + '.h5', 'r+') as f:
        del f['/fields/permeability']
        if k == 'soft': f['/fields/permeability'] = h5py.SoftLink('/nowhere')
        if k == 'external': f['/fields/permeability'] = h5py.ExternalLink('missing.h5', '/k')
        if k == 'group': f.create_group('/fields/permeability')
" || fail "h5py could not edit the files"
    (expect_error "'/fields/permeability' in 'soft.h5' is a soft link to '/nowhere', which does not exist" \
      validate soft.h5) || exit 1
    (expect_error "'/fields/permeability' in 'external.h5' is an external link to '/k' in the file 'missing.h5', which does not exist" \
      validate external.h5) || exit 1
    (expect_error "'/fields/permeability' in 'group.h5' is a group, where the schema wants a dataset" \
      validate group.h5) || exit 1
    # A field reached through an external link is a field like any other: listed by
    # inspect, its values scanned by validate (a NaN in it found); stats, which would write
    # into the other file, refuses it (foreign_files).
    cp d.h5 target.h5 && cp d.h5 linked.h5
    /usr/bin/python3 -c "
import h5py
with h5py.File('target.h5', 'r+') as f: f['/fields/pressure'][1, 0, 2, 3] = float('nan')
with h5py.File('linked.h5', 'r+') as f:
    del f['/fields/pressure']
    f['/fields/pressure'] = h5py.ExternalLink('target.h5', '/fields/pressure')
" || fail "h5py could not link"
    run 2 inspect linked.h5 --no-stats
    echo "$out" | grep -q "^/fields/pressure  (2, 1, 16, 12) float32" || { echo "$out"; fail "inspect skipped the linked field"; }
    (expect_error "'/fields/pressure' in 'linked.h5': non-finite value nan at index (1, 0, 2, 3)" \
      validate linked.h5) || exit 1
    ;;
  foreign_files)  # files as other tools leave them: held by a writer, empty attributes, links
    small_darcy
    for k in empty soft ext ext2 version latest; do cp d.h5 "$k.h5"; done
    cp d.h5 target.h5
    /usr/bin/python3 -c "
import h5py, numpy as np
with h5py.File('empty.h5', 'r+') as f: f['fields/pressure'].attrs['spacing'] = h5py.Empty('f8')
with h5py.File('soft.h5', 'r+') as f:  # the data elsewhere in the file, a soft link at its path
    f.move('fields/permeability', 'store/permeability_data')
    f['fields/permeability'] = h5py.SoftLink('/store/permeability_data')
with h5py.File('ext.h5', 'r+') as f:
    del f['fields/pressure']
    f['fields/pressure'] = h5py.ExternalLink('target.h5', '/fields/pressure')
with h5py.File('ext2.h5', 'r+') as f:
    del f['fields/pressure']
    f['extg'] = h5py.ExternalLink('target.h5', '/fields')
    f['fields/pressure'] = h5py.SoftLink('/extg/pressure')
with h5py.File('version.h5', 'r+') as f: f.attrs['tessera_schema_version'] = np.int64(2**53 + 1)
with h5py.File('d.h5', 'r') as s, h5py.File('latest.h5', 'w', libver='latest') as d:
    for k, v in s.attrs.items(): d.attrs[k] = v
    s.copy('fields', d)" || fail "h5py could not write the files"
    # An empty attribute (h5py.Empty) is a value count like any other, named.
    (expect_error "dataset '/fields/pressure' in 'empty.h5': attribute 'spacing' has 0 entries, expected 2" \
      validate empty.h5) || exit 1
    (expect_error "schema version 9007199254740993 is not one this build reads" validate version.h5) || exit 1
    # A soft link at a schema path to data elsewhere in the file: that data is the field.
    expect_ok 2 validate soft.h5 --quiet
    expect_ok 2 stats soft.h5 --quiet
    expect_ok 3 validate soft.h5 --quiet
    # stats would write its attributes into target.h5 through the link: refused.
    sum=$(sha256sum target.h5 ext.h5 ext2.h5)
    (expect_error "dataset '/fields/pressure' in 'ext.h5' is stored in the file '[^']*target.h5' (through the external link '/fields/pressure'): stats writes only into the file it is given" \
      stats ext.h5) || exit 1
    # ... and through a soft link to an external group.
    (expect_error "dataset '/fields/pressure' in 'ext2.h5' is stored in the file '[^']*target.h5' (through links on the way to it)" \
      stats ext2.h5) || exit 1
    [ "$(sha256sum target.h5 ext.h5 ext2.h5)" = "$sum" ] || fail "a refused stats changed a file"
    # A writer holding the file (h5py's default takes HDF5's lock): refused with locking off
    # here (HDF5 would read its unflushed state) and with it on (HDF5's own lock error, said).
    hold() {  # hold FILE ARGS: an h5py writer keeps FILE open for 30 s, killed on exit
      rm -f ready
      env -u HDF5_USE_FILE_LOCKING /usr/bin/python3 -c "
import h5py, sys, time
f = h5py.File(sys.argv[1], 'a', libver=sys.argv[2])
open('ready', 'w').close()
time.sleep(30)" "$1" "$2" &
      holder=$!
      for _ in $(seq 100); do [ -e ready ] && return; sleep 0.1; done
      fail "the h5py writer did not start"
    }
    hold d.h5 earliest
    (expect_error "cannot open HDF5 file 'd.h5': another process has it open for writing (it holds the file's lock): what it wrote may not be on disk yet" \
      validate d.h5) || { kill $holder; exit 1; }
    (HDF5_USE_FILE_LOCKING=TRUE expect_error "cannot open HDF5 file 'd.h5': another process has it open for writing (it holds the file's lock): close the file there first (unable to lock file" \
      validate d.h5) || { kill $holder; exit 1; }
    kill $holder
    wait $holder 2>/dev/null
    hold latest.h5 latest
    (HDF5_USE_FILE_LOCKING=FALSE expect_error "cannot open HDF5 file 'latest.h5': it is marked open for writing: by a writer still running" \
      validate latest.h5) || { kill $holder; exit 1; }
    kill $holder
    wait $holder 2>/dev/null
    echo "prep_cli foreign_files: held files, empty attributes, links and versions said as they are"
    ;;
  damaged_metadata)  # one byte of metadata damaged: an error, never a hang or a crash
    small_darcy
    cp d.h5 heap.h5 && cp d.h5 attr.h5
    /usr/bin/python3 - <<'PY' || fail "could not damage the copies"
import struct
# The global heap (variable-length strings): the size of its second object made larger, so
# that HDF5 1.10 walks into free space and loops there for ever.
b = bytearray(open('heap.h5', 'rb').read())
g = b.find(b'GCOL')
first = g + 16
second = first + 16 + (struct.unpack_from('<Q', b, first + 8)[0] + 7) // 8 * 8
b[second + 8] ^= 0xff
open('heap.h5', 'wb').write(b)
# An attribute message's version byte (of 'origin'): HDF5 1.10's attribute iteration then
# frees attributes its object header still owns, and closing the file segfaulted.
b = bytearray(open('attr.h5', 'rb').read())
b[b.rfind(b'origin\x00') - 8] = 0xfe
open('attr.h5', 'wb').write(b)
PY
    (expect_error "listing attributes of '/fields/.*' in 'attr.h5' (damaged)" validate attr.h5) || exit 1
    # The heap: HDF5 may loop, or fail; either way the job ends non-zero, within its bound
    # (6 x TESSERA_FAILURE_TIMEOUT), saying which read and why.
    TESSERA_FAILURE_TIMEOUT=2 run 3 validate heap.h5
    echo "$out"
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "exit $rc"
    echo "$out" | grep -qiE "segmentation|core dumped" && fail "crashed"
    echo "$out" | grep -q "^tessera-prep: error.*heap.h5" || fail "no error line naming heap.h5"
    ;;
  partial_filtered)  # a gzip field written in part (h5py): one problem among the others;
    # it sorts first, so the values of the fields after it are still scanned (a NaN found)
    small_darcy
    /usr/bin/python3 -c "
import h5py
with h5py.File('d.h5', 'r+') as f:
    p = f['/fields/permeability']
    d = f.create_dataset('/fields/a', shape=p.shape, dtype='f4', chunks=(1,) + p.shape[1:],
                         compression='gzip')
    d[0] = 1.0
    for a in ('spacing', 'extent'): d.attrs[a] = p.attrs[a]
    d.attrs['variables'] = ['a']
    # Unfiltered and partly written: readable, but the unwritten chunks are fill values.
    b = f.create_dataset('/fields/b', shape=p.shape, dtype='f4', chunks=(1,) + p.shape[1:])
    b[0] = 1.0
    for a in ('spacing', 'extent'): b.attrs[a] = p.attrs[a]
    b.attrs['variables'] = ['b']
    f['/fields/pressure'].attrs['variables'] = ['p', 'q']
    f['/fields/pressure'][1, 0, 2, 3] = float('nan')
" || fail "h5py could not edit d.h5"
    for n in 1 3; do
      run "$n" validate d.h5
      echo "$out"
      [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "exit $rc at $n ranks"
      [ "$(echo "$out" | grep -c "^tessera-prep: error")" -eq 1 ] || fail "not one error line"
      echo "$out" | grep -q "HDF5-DIAG" && fail "an HDF5 error stack leaked to the output"
      for want in "'/fields/a' in 'd.h5' is filtered (compressed or checksummed) and only partly written" \
        "'/fields/b' in 'd.h5' is only partly written: 1 of its 2 chunks were ever written" \
        "'/fields/pressure' in 'd.h5': attribute 'variables' has 2" \
        "'/fields/pressure' in 'd.h5': non-finite value nan at index (1, 0, 2, 3)"; do
        echo "$out" | grep -q "$want" || fail "not listed at $n ranks: $want"
      done
    done
    ;;
  repeated_option) expect_error "option --grid is given twice ('8x8', then '16x16')" generate darcy --grid 8x8 --grid=16x16 --out g.h5 ;;
  wording)  # the messages name the cause
    ramp 48 a.raw
    (expect_error "--append: 'missing.h5', the file to append to, does not exist" \
      convert a.raw --shape 2,1,4,6 --dtype float32 --out missing.h5 --append) || exit 1
    expect_ok 1 convert a.raw --shape 2,1,4,6 --dtype float32 --out A.h5 --name u --quiet
    (expect_error "--append: 'A.h5' holds '/fields/u' already (give another --name)" \
      convert a.raw --shape 2,1,4,6 --dtype float32 --out A.h5 --name u --append) || exit 1
    (expect_error "'/etc' is a directory, not an input file" convert /etc --out e.h5) || exit 1
    # A FIFO would block the open for ever: refused.
    mkfifo fifo.h5
    (expect_error "cannot open HDF5 file 'fifo.h5': not a regular file" validate fifo.h5) || exit 1
    for v in str two float; do cp A.h5 "$v.h5"; done
    /usr/bin/python3 -c "
import h5py, numpy as np
h5py.File('str.h5', 'r+').attrs['tessera_schema_version'] = '1'
h5py.File('two.h5', 'r+').attrs['tessera_schema_version'] = np.int64(2)
h5py.File('float.h5', 'r+').attrs['tessera_schema_version'] = 1.0
" || fail "h5py could not set the attributes"
    (expect_error "root attribute 'tessera_schema_version' is a string '1', not an integer" validate str.h5) || exit 1
    (expect_error "'two.h5': schema version 2 is not one this build reads (1..1)" validate two.h5) || exit 1
    expect_error "root attribute 'tessera_schema_version' is the floating-point number 1.0, not an integer" \
      validate float.h5
    ;;
  *) fail "unknown case" ;;
esac
