"""The vision-language agent: a Hugging Face image-text-to-text model as a trainable policy.

- `agent`: `VLMAgent` (acting with ``generate``, teacher-forced log-probs, weights, saving).
- `config`: `VLMOptions` / `VLMConfig`, torch-free (config loading and ``--help`` read them).
- `load`: the processor, the vision tower's modules, LoRA targets and adapter folders.
- `prompt`: the chat for one step and the devicerl JSON action text.
- `remote`: acting through an OpenAI-compatible inference server.

Nothing is imported here, so ``devicerl.agents.vlm.config`` stays free of torch.
"""
