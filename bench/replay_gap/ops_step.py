#!/usr/bin/python3
"""The MLP training step of tests/replay/record_models.py issued operator by operator from Python
through torch.ops, without autograd or nn modules, as PARAM's et_replay replays a trace: the
operators' work plus Python's cost per call, without the program's own Python around them.
Prints the median process CPU time of one step in microseconds. Usage: ops_step.py [steps]"""
import statistics
import sys
import time

import torch

torch.set_num_threads(1)
torch.set_flush_denormal(True)
torch.manual_seed(0)
A = torch.ops.aten
weights = [torch.randn(512, 256), torch.randn(512, 512), torch.randn(10, 512)]
biases = [torch.randn(512), torch.randn(512), torch.randn(10)]
params = weights + biases
grads = [torch.zeros_like(p) for p in params]
momenta = [torch.zeros_like(p) for p in params]
x = torch.randn(32, 256)
target = torch.randint(0, 10, (32,))


def step():
    for g in grads:
        A.zero_.default(g)
    h1 = A.relu.default(A.linear.default(x, weights[0], biases[0]))
    h2 = A.relu.default(A.linear.default(h1, weights[1], biases[1]))
    out = A.linear.default(h2, weights[2], biases[2])
    A.cross_entropy_loss.default(out, target)
    # The backward operators the autograd engine runs, issued here instead.
    log_probs = A._log_softmax.default(out, 1, False)
    grad = A.nll_loss_backward.default(A.ones.default([]), log_probs, target, None, 1, -100,
                                       A.ones.default([]))
    grad = A._log_softmax_backward_data.default(grad, log_probs, 1, torch.float32)
    inputs = [x, h1, h2]
    for layer in (2, 1, 0):
        grad_in = A.mm.default(grad, weights[layer]) if layer > 0 else None
        A.add_.Tensor(grads[layer], A.mm.default(A.t.default(grad), inputs[layer]))
        A.add_.Tensor(grads[3 + layer], A.sum.dim_IntList(grad, [0]))
        if layer > 0:
            grad = A.threshold_backward.default(grad_in, inputs[layer], 0)
    for p, g, m in zip(params, grads, momenta):
        A.add_.Tensor(A.mul_.Scalar(m, 0.9), g, alpha=0.1)
        A.add_.Tensor(p, m, alpha=-0.01)


for _ in range(5):
    step()
cpu = []
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 200):
    start = time.process_time()
    step()
    cpu.append((time.process_time() - start) * 1e6)
print(f"{statistics.median(cpu):.1f}")
