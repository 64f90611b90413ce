"""The vision-language agent: a Hugging Face image-text-to-text model as a trainable policy.

- `agent`: `VLMAgent` (acting with ``generate``, teacher-forced log-probs, weights, saving).
- `config`: `VLMOptions` / `VLMConfig`, torch-free (config loading and ``--help`` read them).
- `load`: the processor, the vision tower's modules, LoRA targets and adapter folders.
- `prompt`: the element limit and the probe for a chat template's system role.
- `remote`: acting through an OpenAI-compatible inference server.
- `chat`: the agent's chat and JSON action text for a chat fine-tuning export.

Nothing is imported here, so ``devicerl.agents.vlm.config`` stays free of torch.
"""
