"""A torchvision CNN trained on (images, labels) batches with SGD and bfloat16 autocast.

    colo-profile --step examples/profile/torchvision_cnn.py:workload --batch 64 -o resnet50.json
    python examples/profile/torchvision_cnn.py          # the same through colo.profile()
    colo estimate resnet50.json
"""

import torch
import torch.nn.functional as F
import torchvision


def workload(batch_size=64):
    import colo

    model = torchvision.models.resnet50(num_classes=100)
    images = torch.randn(batch_size, 3, 224, 224)
    labels = torch.randint(0, 100, (batch_size,))
    return colo.Workload(
        model, (images, labels),
        forward=lambda m, batch: m(batch[0]),
        loss_fn=lambda out, batch: F.cross_entropy(out, batch[1]),
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4),
        amp="bf16")


if __name__ == "__main__":
    import colo

    model = torchvision.models.resnet50(num_classes=100)
    batch = (torch.randn(64, 3, 224, 224), torch.randint(0, 100, (64,)))
    summary = colo.profile(model, batch,
                           forward=lambda m, b: m(b[0]),
                           loss_fn=lambda out, b: F.cross_entropy(out, b[1]),
                           optimizer=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                           amp="bf16", output="resnet50.json")
    print("resnet50.json:", summary["totals"]["parameters"], "parameters")
