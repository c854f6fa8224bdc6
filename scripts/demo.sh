#!/usr/bin/env bash
# The demo: the d2l LeNet recipe on Fashion-MNIST, trained data-parallel on 2 CPU devices (batch 256 in all,
# lr 0.2, plain SGD, 10 epochs), test accuracy after every epoch. Extra arguments are passed to
# `lockstep train` (e.g. --num_epochs 1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
mkdir -p runs
exec build/lockstep train --model lenet --train_data fashion-mnist --test_data fashion-mnist --use_cpu \
  --num_gpus 2 --batch_size 256 --base_learning_rate 0.2 --momentum 0 --weight_decay 0 --num_epochs 10 \
  --log_dir runs "$@"
