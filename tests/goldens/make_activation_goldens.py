#!/usr/bin/python3
"""The MLP activations' values from PyTorch, for tests/unit/test_model_activations.cpp.

Regenerate: /usr/bin/python3 tests/goldens/make_activation_goldens.py
Writes tests/fixtures/models/activations.json: {"x": [...], "<name>": [...]} in float64, one entry
per activation name of config.json (transformers' ACT2FN: activations.py) and BLOOM's own GELU,
each computed the way transformers computes it, on 401 points of [-12, 12] plus edge values (0,
tiny, the saturation of tanh and of the sigmoid).
"""
import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "models"


def table(x):
    """name -> activations.py's function on X (float64)."""
    return {
        "gelu": F.gelu(x),                                             # GELUActivation
        "gelu_new": 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0)))),
        "gelu_pytorch_tanh": F.gelu(x, approximate="tanh"),            # PytorchGELUTanh
        "gelu_fast": 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x))),
        "bloom_gelu": x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x))),  # modeling_bloom.py
        "quick_gelu": x * torch.sigmoid(1.702 * x),                    # QuickGELUActivation
        "silu": F.silu(x), "swish": F.silu(x),
        "relu": F.relu(x), "tanh": torch.tanh(x),
    }


def main():
    x = torch.cat([torch.linspace(-12, 12, 401, dtype=torch.float64),
                   torch.tensor([0.0, 1e-30, -1e-30, 1e-6, -1e-6, 20.0, -20.0, 40.0, -40.0, 87.0, -87.0, 100.0, -100.0],
                                dtype=torch.float64)])
    out = {"comment": "written by tests/goldens/make_activation_goldens.py (PyTorch " + torch.__version__ + ")",
           "x": x.tolist()}
    out.update({name: y.tolist() for name, y in table(x).items()})
    (ROOT / "activations.json").write_text(json.dumps(out) + "\n")
    print(f"{len(x)} points -> {ROOT / 'activations.json'}")


if __name__ == "__main__":
    main()
