#!/usr/bin/python3
"""Trains the small digit classifiers that `orrery partition` is tested and measured on.

Deterministic: fixed seeds, one thread, deterministic algorithms; the same Debian packages
(python3-torch 1.13, python3-sklearn 1.2) give the same files. Writes into tests/data/partition/:

  calibration.csv, test.csv   model inputs (pixel / 16, exact in decimal) then the label
  digits_mlp.pt               MLP 64-512-512-10, TorchScript (scripted), weights stored as float16
                              to keep the file small (about 600 KB); orrery computes in double
  digits_cnn.pt               CNN conv3x3(1->16) relu conv3x3(16->32) relu maxpool2 fc(512->64)
                              relu fc(64->10), TorchScript (traced), float32
  digits_cnn.onnx             the same CNN exported to ONNX (opset 13)
  digits_mlp_small_state.pt   MLP 64-128-64-10 as a state dict (torch.save of state_dict())
  reference.json              each model's test accuracy and the logits of the first test rows,
                              computed here by PyTorch, which the C++ forward pass must reproduce

Run: /usr/bin/python3 tests/partition/train_digits.py [OUTPUT_DIR]
"""
import json
import os
import sys

# TorchScript writes a module's constants in set order, which string hashing randomises per
# process: a fixed hash seed makes the saved files byte-identical from run to run.
if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "data", "partition")
CALIBRATION_ROWS = 512
TEST_ROWS = 597


def split():
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.RandomState(0).permutation(len(y))
    test = order[:TEST_ROWS]
    train = order[TEST_ROWS:]
    return x, y, train, test


def write_csv(path, x, y):
    with open(path, "w") as out:
        out.write(",".join([f"x{i}" for i in range(x.shape[1])] + ["label"]) + "\n")
        for row, label in zip(x, y):
            # k / 16 prints exactly with %g (0.0625, 0.125, ...).
            out.write(",".join("%g" % v for v in row) + ",%d\n" % label)


class Mlp(nn.Module):
    def __init__(self, widths):
        super().__init__()
        layers = []
        for i in range(len(widths) - 1):
            layers.append(nn.Linear(widths[i], widths[i + 1]))
            if i + 2 < len(widths):
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = x.view(-1, 1, 8, 8)
        x = torch.relu(self.conv1(x))
        x = self.pool(torch.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc1(x))
        return self.fc2(x)


def train(model, x, y, epochs, seed):
    torch.manual_seed(seed)
    for p in model.parameters():
        # Re-initialise from the seed so that the result does not depend on construction order.
        if p.dim() > 1:
            nn.init.kaiming_uniform_(p, a=5 ** 0.5)
        else:
            nn.init.uniform_(p, -0.05, 0.05)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    xt = torch.from_numpy(x)
    yt = torch.from_numpy(y)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        order = torch.randperm(len(yt), generator=generator)
        for start in range(0, len(yt), 64):
            batch = order[start:start + 64]
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xt[batch]), yt[batch])
            loss.backward()
            optimizer.step()
    model.eval()
    return model


def accuracy(model, x, y):
    with torch.no_grad():
        return float((model(torch.from_numpy(x)).argmax(1).numpy() == y).mean())


def logits(model, x):
    with torch.no_grad():
        return model(torch.from_numpy(x[:4])).double().tolist()


def main():
    os.makedirs(OUT, exist_ok=True)
    x, y, train_rows, test_rows = split()
    # Calibration rows come from the training set (the data a deployer has), test rows never do.
    write_csv(os.path.join(OUT, "calibration.csv"), x[train_rows[:CALIBRATION_ROWS]],
              y[train_rows[:CALIBRATION_ROWS]])
    write_csv(os.path.join(OUT, "test.csv"), x[test_rows], y[test_rows])
    xtr, ytr = x[train_rows], y[train_rows]
    xte, yte = x[test_rows], y[test_rows]
    reference = {}

    mlp = train(Mlp([64, 512, 512, 10]), xtr, ytr, epochs=40, seed=1)
    # Stored in float16; the reference figures are those of the stored (rounded) weights.
    mlp = mlp.half().float()
    reference["digits_mlp.pt"] = {"accuracy": accuracy(mlp, xte, yte), "logits": logits(mlp, xte)}
    torch.jit.script(mlp.half()).save(os.path.join(OUT, "digits_mlp.pt"))

    cnn = train(Cnn(), xtr, ytr, epochs=30, seed=2)
    reference["digits_cnn.pt"] = {"accuracy": accuracy(cnn, xte, yte), "logits": logits(cnn, xte)}
    reference["digits_cnn.onnx"] = reference["digits_cnn.pt"]
    example = torch.from_numpy(xte[:1])
    torch.jit.trace(cnn, example).save(os.path.join(OUT, "digits_cnn.pt"))
    torch.onnx.export(cnn, example, os.path.join(OUT, "digits_cnn.onnx"), opset_version=13,
                      input_names=["pixels"], output_names=["logits"],
                      dynamic_axes={"pixels": {0: "batch"}, "logits": {0: "batch"}})

    small = train(Mlp([64, 128, 64, 10]), xtr, ytr, epochs=30, seed=3)
    reference["digits_mlp_small_state.pt"] = {"accuracy": accuracy(small, xte, yte),
                                              "logits": logits(small, xte)}
    torch.save(small.state_dict(), os.path.join(OUT, "digits_mlp_small_state.pt"))

    with open(os.path.join(OUT, "reference.json"), "w") as out:
        json.dump(reference, out, indent=1)
        out.write("\n")
    for name, figures in reference.items():
        print(f"{name}: test accuracy {figures['accuracy']:.4f}")


if __name__ == "__main__":
    main()
