#!/usr/bin/env bash
# lenet5's command-line tests, one case per CTest test (examples/lenet5/CMakeLists.txt):
#   bash cli_test.sh CASE      with LENET5, TESTDATA (the binaries), DATA (MNIST) and WORK (a scratch
#                              directory) in the environment.
# Everything runs on the CPU; exit 77 (skipped) when MNIST is missing for a case that needs it.
set -uo pipefail
case_name=$1
: "${LENET5:?}" "${TESTDATA:?}" "${DATA:?}" "${WORK:?}"
mkdir -p "$WORK"
dir=$WORK/$case_name
rm -rf "$dir" && mkdir -p "$dir"
model=$WORK/model.safetensors  # made by the train case (the lenet5_model fixture)

fail() { echo "FAIL ($case_name): $*" >&2; echo "--- stdout" >&2; cat "$dir/out" >&2; echo "--- stderr" >&2; cat "$dir/err" >&2; exit 1; }
# run EXPECTED_STATUS ARGS...: runs lenet5, keeps stdout/stderr in $dir/out, $dir/err.
run() {
  local want=$1; shift
  "$LENET5" "$@" >"$dir/out" 2>"$dir/err"
  local rc=$?
  ((rc == want)) || fail "lenet5 $* exited $rc, expected $want"
}
err_has() { grep -qF -- "$1" "$dir/err" || fail "stderr lacks: $1"; }
out_has() { grep -qF -- "$1" "$dir/out" || fail "stdout lacks: $1"; }
out_lacks() { ! grep -qF -- "$1" "$dir/out" || fail "stdout has: $1"; }
need_data() { [[ -e $DATA/t10k-labels-idx1-ubyte || -e $DATA/t10k-labels-idx1-ubyte.gz ]] || { echo "no MNIST in $DATA: skipped"; exit 77; }; }
need_model() { [[ -f $model ]] || fail "no model: the train case (fixture lenet5_model) did not run"; }
cpu=(--device cpu --threads 2)

case $case_name in
  version)
    run 0 --version; out_has "lenet5 "; out_has "ctnn " ;;
  usage)
    run 2 train --no-such-option ;;
  no_subcommand)
    run 2 ;;
  lr_tiny)  # issue 10 item 13: 1e-50 was taken as 0
    run 2 train --lr 1e-50 "${cpu[@]}"; err_has "--lr 1e-50: out of range"; out_lacks "epoch" ;;
  lr_nan)
    run 2 train --lr nan "${cpu[@]}"; err_has "must be a finite number"
    run 2 train --lr inf "${cpu[@]}"; err_has "must be a finite number" ;;
  weight_decay_tiny)  # in range, but a float would hold 0: refused, not silently 0
    run 2 train --weight-decay 1e-50 "${cpu[@]}"; err_has "too small to be stored as a float" ;;
  epochs_huge)  # a 300-digit number is echoed briefly
    big=$(printf '9%.0s' {1..300})
    run 2 train --epochs "$big" "${cpu[@]}"; err_has "(300 characters)"
    (($(wc -c <"$dir/err") < 300)) || fail "the message echoes the whole number" ;;
  seed_huge)
    run 2 train --seed 18446744073709551616 "${cpu[@]}"; err_has "--seed"; err_has "out of range" ;;
  batch_cpu)
    run 2 train --batch 512 "${cpu[@]}"; err_has "--batch 512: out of range" ;;
  out_unwritable)  # probed before the data is read or a device opened: no run is lost
    run 3 train --out "$dir/no/such/dir/m.safetensors" --data "$dir/nodata" "${cpu[@]}"
    err_has "does not exist"; out_lacks "epoch" ;;
  metrics_unwritable)
    run 3 train --metrics "$dir/no/such/dir/m.csv" --data "$dir/nodata" --out "$dir/m.safetensors" "${cpu[@]}"
    err_has "m.csv" ;;
  report_unwritable)
    touch "$dir/file"
    run 3 train --report "$dir/file/report" --data "$dir/nodata" --out "$dir/m.safetensors" "${cpu[@]}"
    err_has "report" ;;
  data_missing)
    run 3 train --data "$dir/nodata" --out "$dir/m.safetensors" "${cpu[@]}"; err_has "not found" ;;
  eval_malformed)  # read on the CPU first: --device cuda is not needed to tell the file is bad
    printf 'not a safetensors file at all' >"$dir/bad.safetensors"
    run 3 eval --model "$dir/bad.safetensors" --device cuda --data "$DATA"; err_has "bad.safetensors" ;;
  eval_other_network)
    "$TESTDATA" other "$dir/other.safetensors" || fail "testdata other"
    run 3 eval --model "$dir/other.safetensors" --data "$DATA" "${cpu[@]}"
    err_has "saved for another network"; err_has "layer 0: the file has Conv 4@5x5" ;;
  eval_huge_weights)  # issue 10 item 9: NaN probabilities with exit 0 before
    need_data
    "$TESTDATA" huge "$dir/huge.safetensors" || fail "testdata huge"
    run 5 eval --model "$dir/huge.safetensors" --data "$DATA" --limit 50 "${cpu[@]}"
    err_has "not finite"; err_has "layer 0 (Conv"; out_lacks "nan" ;;
  predict_huge_weights)
    need_data
    "$TESTDATA" huge "$dir/huge.safetensors" || fail "testdata huge"
    "$TESTDATA" png "$DATA" 0 "$dir/digit.png" >/dev/null || fail "testdata png"
    run 5 predict --model "$dir/huge.safetensors" "${cpu[@]}" "$dir/digit.png"
    err_has "not finite"; out_lacks "nan" ;;
  diverges)  # fit's numeric_error is exit status 5 too
    need_data
    run 5 train --data "$DATA" --lr 10 --schedule constant --epochs 2 --limit 512 --test-limit 64 \
      --out "$dir/m.safetensors" "${cpu[@]}"
    err_has "numeric failure" ;;
  train)  # the fixture: a small model for the cases below
    need_data
    rm -f "$model"
    run 0 train --data "$DATA" --limit 6000 --test-limit 1000 --epochs 2 --batch 32 --out "$model" \
      --metrics "$WORK/metrics.csv" --report "$WORK/report" "${cpu[@]}"
    out_has "epoch   2/2"; out_has "saved"
    [[ $(head -1 "$WORK/metrics.csv") == "epoch,loss,train_accuracy,test_accuracy,test_loss,learning_rate,seconds" ]] ||
      fail "CSV header: $(head -1 "$WORK/metrics.csv")"
    (($(wc -l <"$WORK/metrics.csv") == 3)) || fail "CSV rows: $(wc -l <"$WORK/metrics.csv") lines"
    for png in curves confusion misclassified; do
      "$TESTDATA" check-png "$WORK/report/$png.png" >/dev/null || fail "$png.png does not decode"
    done ;;
  eval)
    need_data; need_model
    run 0 eval --model "$model" --data "$DATA" "${cpu[@]}"
    out_has "test accuracy"; out_has "confusion matrix"; out_has "recall"
    acc=$(sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' "$dir/out")
    awk -v a="$acc" 'BEGIN { exit !(a > 90) }' || fail "accuracy $acc% after 2 epochs on 6000 images" ;;
  eval_limit_report)
    need_data; need_model
    run 0 eval --model "$model" --data "$DATA" --limit 500 --report "$dir/report" "${cpu[@]}"
    out_has "(500 MNIST images)"
    for png in confusion misclassified; do
      "$TESTDATA" check-png "$dir/report/$png.png" >/dev/null || fail "$png.png does not decode"
    done ;;
  predict_png)  # issue 11: a PNG made from a test digit is named right
    need_data; need_model
    label=$("$TESTDATA" png "$DATA" 0 "$dir/digit.png") || fail "testdata png"
    run 0 predict --model "$model" "${cpu[@]}" "$dir/digit.png"
    got=$(sed -n 's/^.*digit\.png: \([^ ]*\) .*/\1/p' "$dir/out")
    [[ $got == "$label" ]] || fail "predicted '$got', the label is $label" ;;
  predict_dir_json)
    need_data; need_model
    mkdir -p "$dir/images"
    for i in 1 2 3; do "$TESTDATA" png "$DATA" $i "$dir/images/d$i.png" >>"$dir/labels" || fail "testdata png"; done
    run 0 predict --model "$model" "${cpu[@]}" --json --top 3 "$dir/images"
    out_has '"predictions": ['; out_has '"top": [{"class": '
    (($(grep -o '"file"' "$dir/out" | wc -l) == 3)) || fail "3 files expected"
    (($(grep -o '"probability"' "$dir/out" | wc -l) == 12)) || fail "1 + 3 probabilities per file expected"
    if command -v python3 >/dev/null; then python3 -m json.tool "$dir/out" >/dev/null || fail "not JSON"; fi ;;
  predict_unreadable)
    need_data
    "$TESTDATA" huge "$dir/m.safetensors" >/dev/null || fail "testdata"
    printf 'hello' >"$dir/not_an_image.png"
    run 3 predict --model "$dir/m.safetensors" "${cpu[@]}" "$dir/not_an_image.png"
    err_has "not_an_image.png"; err_has "could not be read" ;;
  device_cuda)  # without a GPU: exit status 4 and a message; with one: it works
    need_data; need_model
    "$LENET5" eval --model "$model" --data "$DATA" --limit 100 --device cuda >"$dir/out" 2>"$dir/err"
    rc=$?
    if ((rc == 4)); then err_has "no usable CUDA device"
    else ((rc == 0)) || fail "exit status $rc"; fi
    "$LENET5" eval --model "$model" --data "$DATA" --limit 100 --device auto >"$dir/out" 2>"$dir/err" || fail "auto"
    if ((rc == 4)); then err_has "running on the CPU"; fi ;;
  fashion)  # data as bright as Fashion-MNIST is taken for it: its class names are stored and printed
    mkdir -p "$dir/fake"
    "$TESTDATA" fake-fashion "$dir/fake" || fail "testdata fake-fashion"
    run 0 train --data "$dir/fake" --epochs 3 --batch 16 --lr 0.02 --out "$dir/f.safetensors" "${cpu[@]}"
    out_has "data: Fashion-MNIST"
    grep -qF '"class_names"' "$dir/f.safetensors" || fail "no class_names in the metadata"
    grep -qF 'Ankle boot' "$dir/f.safetensors" || fail "no Fashion-MNIST names in the metadata"
    run 0 eval --model "$dir/f.safetensors" --data "$dir/fake" "${cpu[@]}"
    out_has "Fashion-MNIST images"; out_has "Ankle boot"
    "$TESTDATA" png "$dir/fake" 0 "$dir/item.png" >/dev/null || fail "testdata png"
    run 0 predict --model "$dir/f.safetensors" --top 2 "${cpu[@]}" "$dir/item.png"
    out_has "(class "; out_has "%, " ;;
  *)
    echo "cli_test.sh: unknown case $case_name" >&2; exit 2 ;;
esac
echo "ok ($case_name)"
