"""The products of one stacked MLP layer (tandem's twin torsos and heads, `[2, ...]` batches of
256 rows), forward and backward, in two layouts, on one thread:

- rows-major, as tandem computes them: activations `[2, B, in]`, weights `[2, in, out]`;
  forward `baddbmm(b, h, W)`, weight gradient `h^T g`, input gradient `g W^T`;
- features-major: activations `[2, in, B]`, weights `[2, out, in]`; forward
  `baddbmm(b, W, h)`, weight gradient `g h^T`, input gradient `W^T g`.

Each figure is the median of 7 rounds of 2,000 calls after 200 warm-up calls, in microseconds,
Python's call overhead included (about 3 us, the `noop` line). Shapes: CartPole's 4 -> 64 -> 64
-> 2, SAC's 256-wide HalfCheetah layers (17 inputs; a head of 6 means and 6 log-deviations) and
a 256 -> 1 value head.
"""
import time

import torch

torch.set_num_threads(1)
torch.manual_seed(0)
B = 256


def median_us(f, calls=2000, rounds=7):
    for _ in range(200):
        f()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            f()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return sorted(times)[rounds // 2]


def layer(inputs, outputs):
    h = torch.randn(2, B, inputs)
    w = torch.randn(2, inputs, outputs)
    b = torch.randn(2, 1, outputs)
    g = torch.randn(2, B, outputs)
    rows = [
        median_us(lambda: torch.baddbmm(b, h, w)),
        median_us(lambda: torch.bmm(h.transpose(1, 2), g)),
        median_us(lambda: torch.bmm(g, w.transpose(1, 2))),
    ]
    ht, wt, bt, gt = (t.transpose(1, 2).contiguous() for t in (h, w, b, g))
    features = [
        median_us(lambda: torch.baddbmm(bt, wt, ht)),
        median_us(lambda: torch.bmm(gt, ht.transpose(1, 2))),
        median_us(lambda: torch.bmm(wt.transpose(1, 2), gt)),
    ]
    return rows, features


def main():
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread")
    print(f"{'layer':>10} | {'rows-major: forward  dW  dX  sum':>34} | {'features-major: forward  dW  dX  sum':>38}")
    for inputs, outputs in [(4, 64), (64, 64), (64, 2), (17, 256), (256, 256), (256, 12), (256, 1)]:
        rows, features = layer(inputs, outputs)
        show = lambda ts: " ".join(f"{t:7.1f}" for t in ts) + f" {sum(ts):8.1f}"
        print(f"{inputs:>4} -> {outputs:<3} | {show(rows):>34} | {show(features):>38}")
    one = torch.zeros(2, 1, 2)
    print(f"noop (torch.add of a [2, 1, 2] tensor): {median_us(lambda: torch.add(one, 0)):.1f} us")


if __name__ == "__main__":
    main()
