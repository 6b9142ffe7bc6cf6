"""A timm Vision Transformer with AdamW, label smoothing and gradient clipping: the user's own
step function runs as it is.

    colo-profile --step examples/profile/timm_vit.py:workload --batch 128 -o vit.json
"""

import torch
import torch.nn.functional as F


def train_step(model, batch, optimizer):
    images, labels = batch
    with torch.autocast(device_type=images.device.type, dtype=torch.bfloat16):
        loss = F.cross_entropy(model(images), labels, label_smoothing=0.1)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


def workload(batch_size=128):
    import colo
    import timm

    model = timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=1000)
    batch = (torch.randn(batch_size, 3, 224, 224), torch.randint(0, 1000, (batch_size,)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    return colo.Workload(model, batch, optimizer=optimizer, step=train_step)
