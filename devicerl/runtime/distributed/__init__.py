"""Learners on several processes / GPUs: data-parallel updates over one torch.distributed group.

Two ways to start (see docs/scaling.md): ``accelerate launch --num_processes N -m devicerl
train ...`` (rank 0 runs the whole trainer, the other ranks only learn; `launch`), or
``learner.num_workers: N`` (a group of N Ray actors; `ray_learners`). Either way every process
holds a replica of the learner (`replica`), draws the same minibatches, learns on its shard and
averages gradients before each optimizer step (`grad_sync`), so all replicas keep identical
parameters. The algorithms only see the `devicerl.algos.grad_sync.GradSync` hook.
"""
