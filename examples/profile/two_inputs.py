"""A custom module with two inputs -- an image and a vector of tabular features -- and a
regression loss.

    colo-profile --step examples/profile/two_inputs.py:workload --batch 256 -o fusion.json
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ImageTabularNet(nn.Module):
    def __init__(self, features=64):
        super().__init__()
        self.image = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(128, 256, 3, padding=1), nn.BatchNorm2d(256), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.table = nn.Sequential(nn.Linear(features, 256), nn.ReLU(), nn.Linear(256, 256))
        self.head = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, image, table):
        return self.head(torch.cat([self.image(image), self.table(table)], dim=1)).squeeze(1)


def workload(batch_size=256):
    import colo

    model = ImageTabularNet()
    batch = {"image": torch.randn(batch_size, 3, 96, 96), "table": torch.randn(batch_size, 64),
             "target": torch.randn(batch_size)}
    return colo.Workload(
        model, batch,
        forward=lambda m, b: m(b["image"], b["table"]),
        loss_fn=lambda out, b: F.mse_loss(out, b["target"]),
        optimizer="adam")


if __name__ == "__main__":
    import colo

    w = workload()
    colo.profile(w, output="fusion.json")
