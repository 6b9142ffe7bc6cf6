"""A Hugging Face sequence classifier (BERT-base, 3 labels) fine-tuned on token ids with an
attention mask; built from its config, so nothing is downloaded.

    colo-profile --step examples/profile/hf_classifier.py:workload --batch 16 -o bert-cls.json
    colo-profile hf:bert --task sequence-classification --batch 16 --seq-len 256 -o same.json
"""

import torch


def workload(batch_size=16, seq_len=256):
    import colo
    import transformers

    config = transformers.BertConfig(num_labels=3)
    model = transformers.BertForSequenceClassification(config)
    ids = torch.randint(0, config.vocab_size, (batch_size, seq_len))
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids),
             "labels": torch.randint(0, 3, (batch_size,))}
    # The model computes its own loss from `labels`: no loss_fn needed.
    return colo.Workload(model, batch, optimizer=torch.optim.AdamW(model.parameters(), lr=2e-5))
