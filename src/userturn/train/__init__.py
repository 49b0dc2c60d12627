"""Post-training that raises interaction awareness, measured with the probe itself.

- ``data``: conversations → token ids with loss masks from the model's own template;
- ``sft``: TRL ``SFTTrainer`` + PEFT LoRA on those examples (loss on user, assistant or both);
- ``pairs``: self-play preference pairs (genuine vs degenerate user turns) from a run;
- ``dpo``: TRL ``DPOTrainer`` + LoRA on those pairs;
- ``evaluate``: the same probe grid on the base and the trained model, before vs after;
- ``common``: the model spec, LoRA and trainer settings, ``train.json``.

Heavy imports (torch, transformers, trl, peft) happen inside functions, so importing the
package (and the CLI) stays fast and works without the ``train`` extra.
"""
