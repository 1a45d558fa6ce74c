/* ds_real_configs.h - DeepSpeed configuration files as users' tools ship
 * them, typed in key for key and value for value (facts; each row cites the
 * repository, path and commit it was read from), with what shardsim must do
 * with each: accepted by `compare` and `train`, or refused naming the key.
 * The first REAL_CONFIGS_MAIN rows are the 31 files of the acceptance
 * measure (15 DeepSpeedExamples, 5 LLaMA-Factory, 5 axolotl, 2 transformers,
 * 3 FastChat, 1 Stanford Alpaca); the rest are further files with features
 * shardsim does not model. Not a test; included by test_ds_config_real.c. */
#ifndef SHARDSIM_TEST_DS_REAL_CONFIGS_H
#define SHARDSIM_TEST_DS_REAL_CONFIGS_H

#include <stddef.h>

typedef struct {
    const char *name;            /* source prefix (dse, lf, ax, hf, fc, alpaca) and the file */
    const char *json;            /* the file's keys and values, whitespace dropped */
    int world;                   /* the world the test runs it at (its batch sizes divide it) */
    int micro_given;             /* 1: the command line gives the micro-batch (the file gives no batch key) */
    const char *compare_refuses; /* NULL: accepted by compare; else the refused key, as the error names it */
    const char *train_refuses;   /* the same for train */
} real_config_t;

static const real_config_t real_configs[] = {
    /* microsoft/DeepSpeedExamples training/autotuning/hf/dsconfigs/ds_config_z0.json @ 83757d9c937d */
    {"dse__training_autotuning_hf_dsconfigs_ds_config_z0",
         "{\"train_micro_batch_size_per_gpu\":\"auto\",\"zero_optimization\":{\"stage\":0}}",
     4, 0, NULL, NULL},
    /* microsoft/DeepSpeedExamples training/autotuning/hf/dsconfigs/ds_config_z1.json @ 83757d9c937d */
    {"dse__training_autotuning_hf_dsconfigs_ds_config_z1",
         "{\"train_micro_batch_size_per_gpu\":\"auto\",\"zero_optimization\":{\"stage\":1}}",
     4, 0, NULL, NULL},
    /* microsoft/DeepSpeedExamples training/autotuning/hf/dsconfigs/ds_config_z2.json @ 83757d9c937d */
    {"dse__training_autotuning_hf_dsconfigs_ds_config_z2",
         "{\"train_micro_batch_size_per_gpu\":\"auto\",\"zero_optimization\":{\"stage\":2}}",
     4, 0, NULL, NULL},
    /* microsoft/DeepSpeedExamples training/autotuning/hf/dsconfigs/ds_config_z3.json @ 83757d9c937d */
    {"dse__training_autotuning_hf_dsconfigs_ds_config_z3",
         "{\"train_micro_batch_size_per_gpu\":\"auto\",\"zero_optimization\":{\"stage\":3}}",
     4, 0, NULL, NULL},
    /* microsoft/DeepSpeedExamples training/autotuning/hf/dsconfigs/ds_config_fp16_z0.json @ 83757d9c937d */
    {"dse__training_autotuning_hf_dsconfigs_ds_config_fp16_z0",
         "{\"train_micro_batch_size_per_gpu\":\"auto\",\"zero_optimization\":{\"stage\":0},"
         "\"fp16\":{\"enabled\":true}}",
     4, 0, NULL, NULL},
    /* microsoft/DeepSpeedExamples training/autotuning/hf/dsconfigs/ds_config_fp16_z1.json @ 83757d9c937d */
    {"dse__training_autotuning_hf_dsconfigs_ds_config_fp16_z1",
         "{\"train_micro_batch_size_per_gpu\":\"auto\",\"zero_optimization\":{\"stage\":1},"
         "\"fp16\":{\"enabled\":true}}",
     4, 0, NULL, NULL},
    /* microsoft/DeepSpeedExamples training/autotuning/hf/dsconfigs/ds_config_fp16_z2.json @ 83757d9c937d */
    {"dse__training_autotuning_hf_dsconfigs_ds_config_fp16_z2",
         "{\"train_micro_batch_size_per_gpu\":\"auto\",\"zero_optimization\":{\"stage\":2},"
         "\"fp16\":{\"enabled\":true}}",
     4, 0, NULL, NULL},
    /* microsoft/DeepSpeedExamples training/autotuning/hf/dsconfigs/ds_config_fp16_z3.json @ 83757d9c937d */
    {"dse__training_autotuning_hf_dsconfigs_ds_config_fp16_z3",
         "{\"train_micro_batch_size_per_gpu\":\"auto\",\"zero_optimization\":{\"stage\":3},"
         "\"fp16\":{\"enabled\":true}}",
     4, 0, NULL, NULL},
    /* microsoft/DeepSpeedExamples training/imagenet/config/ds_config.json @ 83757d9c937d */
    {"dse__training_imagenet_config_ds_config",
         "{\"train_batch_size\":256,\"gradient_accumulation_steps\":1,\"steps_per_print\":50,"
         "\"optimizer\":{\"type\":\"Adam\",\"params\":{\"lr\":0.001,\"betas\":[0.8,0.999],\"eps\":1e-8,"
         "\"weight_decay\":3e-7}},\"zero_optimization\":{\"stage\":0},\"zero_allow_untested_optimizer\":true,"
         "\"fp16\":{\"enabled\":false},\"gradient_clipping\":0,\"prescale_gradients\":false,"
         "\"cuda_visible_devices\":0,\"wall_clock_breakdown\":false}",
     4, 0, NULL, NULL},
    /* microsoft/DeepSpeedExamples training/imagenet/config/ds_fp16_config.json @ 83757d9c937d */
    {"dse__training_imagenet_config_ds_fp16_config",
         "{\"train_batch_size\":256,\"gradient_accumulation_steps\":1,\"steps_per_print\":50,"
         "\"optimizer\":{\"type\":\"Adam\",\"params\":{\"lr\":0.001,\"betas\":[0.8,0.999],\"eps\":1e-8,"
         "\"weight_decay\":3e-7}},\"zero_optimization\":{\"stage\":0},\"zero_allow_untested_optimizer\":true,"
         "\"fp16\":{\"enabled\":true,\"auto_cast\":true},\"gradient_clipping\":0,\"prescale_gradients\":false,"
         "\"cuda_visible_devices\":0,\"wall_clock_breakdown\":false}",
     4, 0, NULL, NULL},
    /* microsoft/DeepSpeedExamples training/imagenet/config/ds_fp16_z1_config.json @ 83757d9c937d */
    {"dse__training_imagenet_config_ds_fp16_z1_config",
         "{\"train_batch_size\":256,\"gradient_accumulation_steps\":1,\"steps_per_print\":50,"
         "\"optimizer\":{\"type\":\"Adam\",\"params\":{\"lr\":0.001,\"betas\":[0.8,0.999],\"eps\":1e-8,"
         "\"weight_decay\":3e-7}},\"zero_optimization\":{\"stage\":1},\"zero_allow_untested_optimizer\":true,"
         "\"fp16\":{\"enabled\":true,\"auto_cast\":true},\"gradient_clipping\":0,\"prescale_gradients\":false,"
         "\"cuda_visible_devices\":0,\"wall_clock_breakdown\":false}",
     4, 0, NULL, NULL},
    /* microsoft/DeepSpeedExamples training/gan/gan_deepspeed_config.json @ 83757d9c937d */
    {"dse__training_gan_gan_deepspeed_config",
         "{\"train_batch_size\":64,\"optimizer\":{\"type\":\"Adam\",\"params\":{\"lr\":0.0002,\"betas\":[0.5,"
         "0.999],\"eps\":1e-8}},\"steps_per_print\":10}",
     4, 0, NULL, NULL},
    /* microsoft/DeepSpeedExamples training/pipeline_parallelism/ds_config.json @ 83757d9c937d */
    {"dse__training_pipeline_parallelism_ds_config",
         "{\"train_batch_size\":256,\"train_micro_batch_size_per_gpu\":8,\"optimizer\":{\"type\":\"Adam\","
         "\"params\":{\"lr\":0.001,\"betas\":[0.9,0.999],\"eps\":1e-8}},\"steps_per_print\":10,"
         "\"wall_clock_breakdown\":false}",
     4, 0, NULL, NULL},
    /* microsoft/DeepSpeedExamples training/BingBertSquad/deepspeed_bsz24_config.json @ 83757d9c937d */
    {"dse__training_BingBertSquad_deepspeed_bsz24_config",
         "{\"train_batch_size\":24,\"train_micro_batch_size_per_gpu\":3,\"steps_per_print\":10,"
         "\"optimizer\":{\"type\":\"Adam\",\"params\":{\"lr\":3e-5,\"weight_decay\":0.0,"
         "\"bias_correction\":false}},\"gradient_clipping\":1.0,\"fp16\":{\"enabled\":true}}",
     4, 0, NULL, NULL},
    /* microsoft/DeepSpeedExamples compression/gpt2/config/ds_config.json @ 83757d9c937d */
    {"dse__compression_gpt2_config_ds_config",
         "{\"train_batch_size\":8,\"train_micro_batch_size_per_gpu\":4,\"steps_per_print\":50,"
         "\"optimizer\":{\"type\":\"Adam\",\"params\":{\"lr\":0.001,\"betas\":[0.8,0.999],\"eps\":1e-8,"
         "\"weight_decay\":3e-7}},\"zero_optimization\":{\"stage\":0},\"fp16\":{\"enabled\":true},"
         "\"gradient_clipping\":1.0,\"prescale_gradients\":true,\"wall_clock_breakdown\":false}",
     2, 0, NULL, NULL},
    /* hiyouga/LLaMA-Factory examples/deepspeed/ds_z0_config.json @ 1d6e8b218240 */
    {"lf__ds_z0_config",
         "{\"train_batch_size\":\"auto\",\"train_micro_batch_size_per_gpu\":\"auto\","
         "\"gradient_accumulation_steps\":\"auto\",\"gradient_clipping\":\"auto\","
         "\"zero_allow_untested_optimizer\":true,\"fp16\":{\"enabled\":\"auto\",\"loss_scale\":0,"
         "\"loss_scale_window\":1000,\"initial_scale_power\":16,\"hysteresis\":2,\"min_loss_scale\":1},"
         "\"bf16\":{\"enabled\":\"auto\"},\"zero_optimization\":{\"stage\":0,\"allgather_partitions\":true,"
         "\"allgather_bucket_size\":5e8,\"overlap_comm\":false,\"reduce_scatter\":true,"
         "\"reduce_bucket_size\":5e8,\"contiguous_gradients\":true,\"round_robin_gradients\":true},"
         "\"comms_config\":{\"verbose\":false},\"monitor_config\":{\"enabled\":true,"
         "\"tag\":\"DeepSpeedMonitor\",\"csv_monitor\":{\"enabled\":false}}}",
     4, 0, NULL, NULL},
    /* hiyouga/LLaMA-Factory examples/deepspeed/ds_z2_config.json @ 1d6e8b218240 */
    {"lf__ds_z2_config",
         "{\"train_batch_size\":\"auto\",\"train_micro_batch_size_per_gpu\":\"auto\","
         "\"gradient_accumulation_steps\":\"auto\",\"gradient_clipping\":\"auto\","
         "\"zero_allow_untested_optimizer\":true,\"fp16\":{\"enabled\":\"auto\",\"loss_scale\":0,"
         "\"loss_scale_window\":1000,\"initial_scale_power\":16,\"hysteresis\":2,\"min_loss_scale\":1},"
         "\"bf16\":{\"enabled\":\"auto\"},\"zero_optimization\":{\"stage\":2,\"allgather_partitions\":true,"
         "\"allgather_bucket_size\":5e8,\"overlap_comm\":false,\"reduce_scatter\":true,"
         "\"reduce_bucket_size\":5e8,\"contiguous_gradients\":true,\"round_robin_gradients\":true},"
         "\"comms_config\":{\"verbose\":false},\"monitor_config\":{\"enabled\":true,"
         "\"tag\":\"DeepSpeedMonitor\",\"csv_monitor\":{\"enabled\":false}}}",
     4, 0, NULL, NULL},
    /* hiyouga/LLaMA-Factory examples/deepspeed/ds_z2_offload_config.json @ 1d6e8b218240 */
    {"lf__ds_z2_offload_config",
         "{\"train_batch_size\":\"auto\",\"train_micro_batch_size_per_gpu\":\"auto\","
         "\"gradient_accumulation_steps\":\"auto\",\"gradient_clipping\":\"auto\","
         "\"zero_allow_untested_optimizer\":true,\"fp16\":{\"enabled\":\"auto\",\"loss_scale\":0,"
         "\"loss_scale_window\":1000,\"initial_scale_power\":16,\"hysteresis\":2,\"min_loss_scale\":1},"
         "\"bf16\":{\"enabled\":\"auto\"},\"zero_optimization\":{\"stage\":2,"
         "\"offload_optimizer\":{\"device\":\"cpu\",\"pin_memory\":true},\"allgather_partitions\":true,"
         "\"allgather_bucket_size\":5e8,\"overlap_comm\":false,\"reduce_scatter\":true,"
         "\"reduce_bucket_size\":5e8,\"contiguous_gradients\":true,\"round_robin_gradients\":true},"
         "\"comms_config\":{\"verbose\":false},\"monitor_config\":{\"enabled\":true,"
         "\"tag\":\"DeepSpeedMonitor\",\"csv_monitor\":{\"enabled\":false}}}",
     4, 0, NULL, NULL},
    /* hiyouga/LLaMA-Factory examples/deepspeed/ds_z3_config.json @ 1d6e8b218240 */
    {"lf__ds_z3_config",
         "{\"train_batch_size\":\"auto\",\"train_micro_batch_size_per_gpu\":\"auto\","
         "\"gradient_accumulation_steps\":\"auto\",\"gradient_clipping\":\"auto\","
         "\"zero_allow_untested_optimizer\":true,\"fp16\":{\"enabled\":\"auto\",\"loss_scale\":0,"
         "\"loss_scale_window\":1000,\"initial_scale_power\":16,\"hysteresis\":2,\"min_loss_scale\":1},"
         "\"bf16\":{\"enabled\":\"auto\"},\"zero_optimization\":{\"stage\":3,\"overlap_comm\":false,"
         "\"contiguous_gradients\":true,\"sub_group_size\":1e9,\"reduce_bucket_size\":\"auto\","
         "\"stage3_prefetch_bucket_size\":\"auto\",\"stage3_param_persistence_threshold\":\"auto\","
         "\"stage3_max_live_parameters\":1e9,\"stage3_max_reuse_distance\":1e9,"
         "\"stage3_gather_16bit_weights_on_model_save\":true},\"comms_config\":{\"verbose\":false},"
         "\"monitor_config\":{\"enabled\":true,\"tag\":\"DeepSpeedMonitor\","
         "\"csv_monitor\":{\"enabled\":false}}}",
     4, 0, NULL, NULL},
    /* hiyouga/LLaMA-Factory examples/deepspeed/ds_z3_offload_config.json @ 1d6e8b218240 */
    {"lf__ds_z3_offload_config",
         "{\"train_batch_size\":\"auto\",\"train_micro_batch_size_per_gpu\":\"auto\","
         "\"gradient_accumulation_steps\":\"auto\",\"gradient_clipping\":\"auto\","
         "\"zero_allow_untested_optimizer\":true,\"fp16\":{\"enabled\":\"auto\",\"loss_scale\":0,"
         "\"loss_scale_window\":1000,\"initial_scale_power\":16,\"hysteresis\":2,\"min_loss_scale\":1},"
         "\"bf16\":{\"enabled\":\"auto\"},\"zero_optimization\":{\"stage\":3,"
         "\"offload_optimizer\":{\"device\":\"cpu\",\"pin_memory\":true},"
         "\"offload_param\":{\"device\":\"cpu\",\"pin_memory\":true},\"overlap_comm\":false,"
         "\"contiguous_gradients\":true,\"sub_group_size\":1e9,\"reduce_bucket_size\":\"auto\","
         "\"stage3_prefetch_bucket_size\":\"auto\",\"stage3_param_persistence_threshold\":\"auto\","
         "\"stage3_max_live_parameters\":1e9,\"stage3_max_reuse_distance\":1e9,"
         "\"stage3_gather_16bit_weights_on_model_save\":true},\"comms_config\":{\"verbose\":false},"
         "\"monitor_config\":{\"enabled\":true,\"tag\":\"DeepSpeedMonitor\","
         "\"csv_monitor\":{\"enabled\":false}}}",
     4, 0, NULL, NULL},
    /* axolotl-ai-cloud/axolotl deepspeed_configs/zero1.json @ 3fa91bdb4282 */
    {"ax__zero1",
         "{\"zero_optimization\":{\"stage\":1,\"overlap_comm\":true},\"bf16\":{\"enabled\":\"auto\"},"
         "\"fp16\":{\"enabled\":\"auto\",\"auto_cast\":false,\"loss_scale\":0,\"initial_scale_power\":32,"
         "\"loss_scale_window\":1000,\"hysteresis\":2,\"min_loss_scale\":1},\"optimizer\":{\"type\":\"AdamW\","
         "\"params\":{\"lr\":\"auto\",\"betas\":\"auto\",\"eps\":\"auto\",\"weight_decay\":\"auto\"}},"
         "\"gradient_accumulation_steps\":\"auto\",\"train_batch_size\":\"auto\","
         "\"train_micro_batch_size_per_gpu\":\"auto\",\"wall_clock_breakdown\":false}",
     4, 0, NULL, NULL},
    /* axolotl-ai-cloud/axolotl deepspeed_configs/zero2.json @ 58b1d3a4f449 */
    {"ax__zero2",
         "{\"zero_optimization\":{\"stage\":2,\"offload_optimizer\":{\"device\":\"cpu\"},"
         "\"contiguous_gradients\":true,\"overlap_comm\":true},\"bf16\":{\"enabled\":\"auto\"},"
         "\"fp16\":{\"enabled\":\"auto\",\"auto_cast\":false,\"loss_scale\":0,\"initial_scale_power\":32,"
         "\"loss_scale_window\":1000,\"hysteresis\":2,\"min_loss_scale\":1},"
         "\"gradient_accumulation_steps\":\"auto\",\"gradient_clipping\":\"auto\","
         "\"train_batch_size\":\"auto\",\"train_micro_batch_size_per_gpu\":\"auto\","
         "\"wall_clock_breakdown\":false}",
     4, 0, NULL, NULL},
    /* axolotl-ai-cloud/axolotl deepspeed_configs/zero3.json @ 2341b2c0e42c */
    {"ax__zero3",
         "{\"zero_optimization\":{\"stage\":3,\"overlap_comm\":true,\"contiguous_gradients\":true,"
         "\"sub_group_size\":0,\"reduce_bucket_size\":\"auto\",\"stage3_prefetch_bucket_size\":\"auto\","
         "\"stage3_param_persistence_threshold\":\"auto\",\"stage3_max_live_parameters\":0,"
         "\"stage3_max_reuse_distance\":0,\"stage3_gather_16bit_weights_on_model_save\":true},"
         "\"bf16\":{\"enabled\":\"auto\"},\"fp16\":{\"enabled\":\"auto\",\"auto_cast\":false,\"loss_scale\":0,"
         "\"initial_scale_power\":32,\"loss_scale_window\":1000,\"hysteresis\":2,\"min_loss_scale\":1},"
         "\"gradient_accumulation_steps\":\"auto\",\"gradient_clipping\":\"auto\","
         "\"train_batch_size\":\"auto\",\"train_micro_batch_size_per_gpu\":\"auto\","
         "\"wall_clock_breakdown\":false}",
     4, 0, NULL, NULL},
    /* axolotl-ai-cloud/axolotl deepspeed_configs/zero3_bf16.json @ 1aaebb0dc122 */
    {"ax__zero3_bf16",
         "{\"zero_optimization\":{\"stage\":3,\"overlap_comm\":true,\"contiguous_gradients\":true,"
         "\"sub_group_size\":0,\"reduce_bucket_size\":\"auto\",\"prefetch_bucket_size\":\"auto\","
         "\"param_persistence_threshold\":\"auto\",\"max_live_parameters\":0,\"max_reuse_distance\":0,"
         "\"gather_16bit_weights_on_model_save\":true},\"bf16\":{\"enabled\":true},"
         "\"gradient_accumulation_steps\":\"auto\",\"gradient_clipping\":\"auto\","
         "\"train_batch_size\":\"auto\",\"train_micro_batch_size_per_gpu\":\"auto\","
         "\"wall_clock_breakdown\":false}",
     4, 0, NULL, NULL},
    /* axolotl-ai-cloud/axolotl deepspeed_configs/zero3_bf16_cpuoffload_all.json @ 1377ccc3e46b */
    {"ax__zero3_bf16_cpuoffload_all",
         "{\"zero_force_ds_cpu_optimizer\":false,\"zero_allow_untested_optimizer\":true,"
         "\"zero_optimization\":{\"stage\":3,\"offload_optimizer\":{\"device\":\"cpu\",\"pin_memory\":true},"
         "\"offload_param\":{\"device\":\"cpu\",\"pin_memory\":true},\"overlap_comm\":true,"
         "\"contiguous_gradients\":true,\"sub_group_size\":0,\"reduce_bucket_size\":\"auto\","
         "\"stage3_prefetch_bucket_size\":\"auto\",\"stage3_param_persistence_threshold\":\"auto\","
         "\"max_live_parameters\":0,\"max_reuse_distance\":0,\"gather_16bit_weights_on_model_save\":true},"
         "\"bf16\":{\"enabled\":true},\"gradient_accumulation_steps\":\"auto\",\"gradient_clipping\":\"auto\","
         "\"train_batch_size\":\"auto\",\"train_micro_batch_size_per_gpu\":\"auto\","
         "\"wall_clock_breakdown\":false}",
     4, 0, NULL, NULL},
    /* huggingface/transformers tests/deepspeed/ds_config_zero2.json @ 00e12e7c5459 */
    {"hf__ds_config_zero2",
         "{\"fp16\":{\"enabled\":\"auto\",\"loss_scale\":0,\"loss_scale_window\":1000,"
         "\"initial_scale_power\":16,\"hysteresis\":2,\"min_loss_scale\":1},\"bf16\":{\"enabled\":\"auto\"},"
         "\"optimizer\":{\"type\":\"AdamW\",\"params\":{\"lr\":\"auto\",\"betas\":\"auto\",\"eps\":\"auto\","
         "\"weight_decay\":\"auto\"}},\"scheduler\":{\"type\":\"WarmupLR\","
         "\"params\":{\"warmup_min_lr\":\"auto\",\"warmup_max_lr\":\"auto\",\"warmup_num_steps\":\"auto\"}},"
         "\"zero_optimization\":{\"stage\":2,\"offload_optimizer\":{\"device\":\"cpu\",\"pin_memory\":true},"
         "\"allgather_partitions\":true,\"allgather_bucket_size\":2e8,\"overlap_comm\":true,"
         "\"reduce_scatter\":true,\"reduce_bucket_size\":2e8,\"contiguous_gradients\":true},"
         "\"gradient_accumulation_steps\":\"auto\",\"gradient_clipping\":\"auto\",\"steps_per_print\":2000,"
         "\"train_batch_size\":\"auto\",\"train_micro_batch_size_per_gpu\":\"auto\","
         "\"wall_clock_breakdown\":false}",
     4, 0, NULL, NULL},
    /* huggingface/transformers tests/deepspeed/ds_config_zero3.json @ 61c7ec94b563 */
    {"hf__ds_config_zero3",
         "{\"fp16\":{\"enabled\":true,\"loss_scale\":0,\"loss_scale_window\":1000,\"initial_scale_power\":16,"
         "\"hysteresis\":2,\"min_loss_scale\":1},\"zero_optimization\":{\"stage\":3,"
         "\"offload_optimizer\":{\"device\":\"cpu\",\"pin_memory\":true},"
         "\"offload_param\":{\"device\":\"cpu\",\"pin_memory\":true},\"overlap_comm\":true,"
         "\"contiguous_gradients\":true,\"sub_group_size\":1e14,\"reduce_bucket_size\":0,"
         "\"stage3_prefetch_bucket_size\":0,\"stage3_param_persistence_threshold\":0,"
         "\"stage3_max_live_parameters\":1e9,\"stage3_max_reuse_distance\":1e9,"
         "\"stage3_gather_fp16_weights_on_model_save\":true},\"optimizer\":{\"type\":\"AdamW\","
         "\"params\":{\"lr\":3e-5,\"betas\":[0.8,0.999],\"eps\":1e-8,\"weight_decay\":3e-7}},"
         "\"scheduler\":{\"type\":\"WarmupLR\",\"params\":{\"warmup_min_lr\":0,\"warmup_max_lr\":3e-5,"
         "\"warmup_num_steps\":500}},\"steps_per_print\":2000,\"wall_clock_breakdown\":false}",
     4, 1, NULL, NULL},
    /* lm-sys/FastChat playground/deepspeed_config_s2.json @ 134fc8d9a30e */
    {"fc__deepspeed_config_s2",
         "{\"zero_optimization\":{\"stage\":2,\"offload_optimizer\":{\"device\":\"cpu\"},"
         "\"contiguous_gradients\":true,\"overlap_comm\":true},\"train_micro_batch_size_per_gpu\":\"auto\","
         "\"gradient_accumulation_steps\":\"auto\"}",
     4, 0, NULL, NULL},
    /* lm-sys/FastChat playground/deepspeed_config_s3.json @ 2afa628be4e9 */
    {"fc__deepspeed_config_s3",
         "{\"fp16\":{\"enabled\":\"auto\",\"loss_scale\":0,\"loss_scale_window\":1000,"
         "\"initial_scale_power\":16,\"hysteresis\":2,\"min_loss_scale\":1},"
         "\"zero_optimization\":{\"stage\":3,\"offload_optimizer\":{\"device\":\"cpu\",\"pin_memory\":true},"
         "\"offload_param\":{\"device\":\"cpu\",\"pin_memory\":true},\"overlap_comm\":true,"
         "\"contiguous_gradients\":true,\"stage3_max_live_parameters\":1e9,\"stage3_max_reuse_distance\":1e9,"
         "\"stage3_prefetch_bucket_size\":5e8,\"stage3_param_persistence_threshold\":1e6,"
         "\"sub_group_size\":1e12,\"stage3_gather_16bit_weights_on_model_save\":true},"
         "\"train_batch_size\":\"auto\",\"train_micro_batch_size_per_gpu\":\"auto\","
         "\"gradient_accumulation_steps\":\"auto\"}",
     4, 0, NULL, NULL},
    /* lm-sys/FastChat playground/deepspeed_config_lora_s2.json @ 70baa0f89632 */
    {"fc__deepspeed_config_lora_s2",
         "{\"bf16\":{\"enabled\":\"auto\"},\"optimizer\":{\"type\":\"AdamW\",\"params\":{\"lr\":\"auto\","
         "\"weight_decay\":\"auto\",\"torch_adam\":true,\"adam_w_mode\":true}},"
         "\"scheduler\":{\"type\":\"WarmupDecayLR\",\"params\":{\"warmup_min_lr\":\"auto\","
         "\"warmup_max_lr\":\"auto\",\"warmup_num_steps\":\"auto\",\"total_num_steps\":\"auto\"}},"
         "\"zero_optimization\":{\"stage\":2,\"allgather_partitions\":true,\"allgather_bucket_size\":2e8,"
         "\"offload_optimizer\":{\"device\":\"cpu\"},\"overlap_comm\":true,\"reduce_scatter\":true,"
         "\"reduce_bucket_size\":\"auto\",\"contiguous_gradients\":true},\"gradient_clipping\":\"auto\","
         "\"steps_per_print\":2000,\"train_batch_size\":\"auto\",\"train_micro_batch_size_per_gpu\":\"auto\","
         "\"wall_clock_breakdown\":false}",
     4, 0, NULL, NULL},
    /* tatsu-lab/stanford_alpaca configs/default_offload_opt_param.json @ 3783d185b542 */
    {"alpaca__default_offload_opt_param",
         "{\"bf16\":{\"enabled\":\"auto\"},\"optimizer\":{\"type\":\"AdamW\",\"params\":{\"lr\":\"auto\","
         "\"betas\":\"auto\",\"eps\":\"auto\",\"weight_decay\":\"auto\"}},"
         "\"scheduler\":{\"type\":\"WarmupDecayLR\",\"params\":{\"total_num_steps\":\"auto\","
         "\"warmup_min_lr\":\"auto\",\"warmup_max_lr\":\"auto\",\"warmup_num_steps\":\"auto\"}},"
         "\"zero_optimization\":{\"stage\":3,\"offload_optimizer\":{\"device\":\"cpu\",\"pin_memory\":true},"
         "\"offload_param\":{\"device\":\"cpu\",\"pin_memory\":true},\"overlap_comm\":true,"
         "\"contiguous_gradients\":true,\"sub_group_size\":1e9,\"reduce_bucket_size\":\"auto\","
         "\"stage3_prefetch_bucket_size\":\"auto\",\"stage3_param_persistence_threshold\":\"auto\","
         "\"stage3_max_live_parameters\":1e9,\"stage3_max_reuse_distance\":1e9,"
         "\"stage3_gather_16bit_weights_on_model_save\":false},\"gradient_accumulation_steps\":\"auto\","
         "\"gradient_clipping\":\"auto\",\"steps_per_print\":5,\"train_batch_size\":\"auto\","
         "\"train_micro_batch_size_per_gpu\":\"auto\",\"wall_clock_breakdown\":false}",
     4, 0, NULL, NULL},
    /* ---- beyond the 31: features shardsim does not model, and one more accepted ---- */
    /* lm-sys/FastChat playground/deepspeed_config_lora_s3.json @ 70baa0f89632 */
    {"fc__deepspeed_config_lora_s3",
         "{\"bf16\":{\"enabled\":\"auto\"},\"optimizer\":{\"type\":\"AdamW\",\"params\":{\"lr\":\"auto\","
         "\"weight_decay\":\"auto\"}},\"scheduler\":{\"type\":\"WarmupDecayLR\","
         "\"params\":{\"warmup_min_lr\":\"auto\",\"warmup_max_lr\":\"auto\",\"warmup_num_steps\":\"auto\","
         "\"total_num_steps\":\"auto\"}},\"zero_optimization\":{\"stage\":3,"
         "\"offload_optimizer\":{\"device\":\"cpu\",\"pin_memory\":true},"
         "\"offload_param\":{\"device\":\"cpu\",\"pin_memory\":true},\"overlap_comm\":true,"
         "\"contiguous_gradients\":true,\"reduce_bucket_size\":\"auto\","
         "\"stage3_prefetch_bucket_size\":\"auto\",\"stage3_param_persistence_threshold\":\"auto\","
         "\"sub_group_size\":1e9,\"stage3_max_live_parameters\":1e9,\"stage3_max_reuse_distance\":1e9,"
         "\"stage3_gather_16bit_weights_on_model_save\":\"auto\"},\"gradient_accumulation_steps\":\"auto\","
         "\"gradient_clipping\":\"auto\",\"steps_per_print\":2000,\"train_batch_size\":\"auto\","
         "\"train_micro_batch_size_per_gpu\":\"auto\",\"wall_clock_breakdown\":false}",
     4, 0, NULL, NULL},
    /* microsoft/DeepSpeedExamples training/bing_bert/deepspeed_bsz64k_lamb_config_seq128.json @ 83757d9c937d */
    {"dse__training_bing_bert_deepspeed_bsz64k_lamb_config_seq128",
         "{\"train_batch_size\":65536,\"train_micro_batch_size_per_gpu\":64,\"steps_per_print\":1000,"
         "\"prescale_gradients\":false,\"optimizer\":{\"type\":\"Lamb\",\"params\":{\"lr\":11e-3,"
         "\"weight_decay\":0.01,\"bias_correction\":false,\"max_coeff\":0.3,\"min_coeff\":0.01}},"
         "\"gradient_clipping\":1.0,\"wall_clock_breakdown\":false,\"fp16\":{\"enabled\":true,"
         "\"loss_scale\":0},\"sparse_attention\":{\"mode\":\"fixed\",\"block\":16,"
         "\"different_layout_per_head\":true,\"num_local_blocks\":4,\"num_global_blocks\":1,"
         "\"attention\":\"bidirectional\",\"horizontal_global_attention\":false,"
         "\"num_different_global_patterns\":4}}",
     4, 0, "optimizer.type = \"Lamb\"", "optimizer.type = \"Lamb\""},
    /* microsoft/DeepSpeedExamples training/bing_bert/deepspeed_bsz4k_progressive_layer_drop_config_seq128.json @ 83757d9c937d */
    {"dse__training_bing_bert_deepspeed_bsz4k_progressive_layer_drop_config_seq128",
         "{\"train_batch_size\":4096,\"train_micro_batch_size_per_gpu\":16,\"steps_per_print\":1000,"
         "\"prescale_gradients\":true,\"gradient_predivide_factor\":8,\"optimizer\":{\"type\":\"Adam\","
         "\"params\":{\"lr\":1e-3,\"weight_decay\":0.01,\"bias_correction\":false}},\"gradient_clipping\":1.0,"
         "\"wall_clock_breakdown\":false,\"fp16\":{\"enabled\":true,\"loss_scale\":0},"
         "\"progressive_layer_drop\":{\"enabled\":true,\"theta\":0.5,\"gamma\":0.001}}",
     4, 0, "progressive_layer_drop", "progressive_layer_drop"},
    /* microsoft/DeepSpeedExamples training/data_efficiency/gpt_finetuning/config/ds_config_gpt_base_random_ltd.json @ 83757d9c937d */
    {"dse__training_data_efficiency_gpt_finetuning_config_ds_config_gpt_base_random_ltd",
         "{\"train_batch_size\":4,\"train_micro_batch_size_per_gpu\":2,\"steps_per_print\":2,"
         "\"optimizer\":{\"type\":\"Adam\",\"params\":{\"lr\":0.0001,\"betas\":[0.8,0.999],\"eps\":1e-8,"
         "\"weight_decay\":3e-7}},\"zero_optimization\":{\"stage\":0},\"fp16\":{\"enabled\":false},"
         "\"gradient_clipping\":1.0,\"prescale_gradients\":true,\"wall_clock_breakdown\":false,"
         "\"data_efficiency\":{\"enabled\":true,\"data_routing\":{\"enabled\":true,"
         "\"random_ltd\":{\"enabled\":true,\"total_layer_num\":12,\"random_ltd_layer_num\":10,"
         "\"random_ltd_layer_id\":[1,2,3,4,5,6,7,8,9,10],\"model_mask_name\":\"attention_mask\","
         "\"model_type\":\"decoder\",\"hidden_state_order\":\"batch_seq_dim\","
         "\"random_ltd_schedule\":{\"min_value\":128,\"max_value\":1024,\"schedule_type\":\"fixed_linear\","
         "\"schedule_config\":{\"require_steps\":400,\"seq_per_step\":8}}}}}}",
     2, 0, "data_efficiency", "data_efficiency"},
    /* microsoft/DeepSpeedExamples training/MoQ/test.json @ 83757d9c937d */
    {"dse__training_MoQ_test",
         "{\"steps_per_print\":10,\"gradient_clipping\":1.0,\"fp16\":{\"initial_scale_power\":16,"
         "\"enabled\":true},\"quantize_training\":{\"enabled\":true,\"quantize_verbose\":true,"
         "\"quantizer_kernel\":true,\"quantize_algo\":{\"q_type\":\"symmetric\"},"
         "\"quantize_bits\":{\"start_bits\":16,\"target_bits\":8},"
         "\"quantize_schedule\":{\"quantize_period\":400,\"schedule_offset\":0},\"quantize_groups\":8}}",
     4, 0, "quantize_training", "quantize_training"},
};

#define REAL_CONFIGS_MAIN 31
#define REAL_CONFIGS_COUNT (sizeof real_configs / sizeof real_configs[0])

#endif
