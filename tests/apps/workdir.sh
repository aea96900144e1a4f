# Sourced by the app test scripts: enter_workdir WORK NAME makes a fresh folder
# WORK/NAME.XXXXXX, removed when the script exits, and changes into it ($dir).
enter_workdir() {
  mkdir -p "$1" || exit 1
  dir=$(mktemp -d "$1/$2.XXXXXX") || exit 1
  trap 'rm -rf "$dir"' EXIT
  cd "$dir" || exit 1
}
