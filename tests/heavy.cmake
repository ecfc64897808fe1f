# Tests that take minutes under AddressSanitizer (whole-model numerics, Python oracles on
# 100+ MB models, compress runs). They carry the label "heavy": the Release run executes
# them; the ASan+UBSan run (test.sh) leaves them out with `ctest -LE heavy` to stay within
# CI time. Each was run under ASan+UBSan by hand when it was written.
foreach(t py_gguf_llamacpp py_gguf_oracle py_eval_ppl test_quant_gptq test_quant_awq test_runtime_llama
          test_calib_compress cli_compress cli_compress_smollm2 py_compress_gguf py_qpack_hostile
          py_tokenizer_json py_quant_oracle cli_compress_golden cli_pipeline test_compress_eval
          cli_layerdrop_smollm2 cli_sparsity_smollm2
          cli_edge_smollm2 py_gguf_types cli_pad_ffn py_quant_mix cli_limits_smollm2 cli_progress_smollm2
          cli_prune_smollm2 cli_chat_smollm2
          py_onnx_export_smollm2 cli_rotate_smollm2 cli_rotate_llamacpp cli_rotate_qwen05 cli_rotate_transformers
          cli_try_rotate_smollm2
          py_hf_transformers py_hf_float py_hf_gptqmodel py_eval_tasks)
  if(TEST ${t})
    get_test_property(${t} LABELS _labels)
    set_tests_properties(${t} PROPERTIES LABELS "${_labels};heavy")
  endif()
endforeach()

# Whole-model runs of what a small sibling test already checks on the tiny models (the same
# script without its model argument): the label "full" as well. test.sh leaves them out unless
# SQZ_FULL_TESTS=1 (they were 1,000 s of the Release run's test time and kept CI near its limit);
# run them before resolving an issue that touches their stage.
#   cli_sparsity_smollm2 (cli_sparsity), cli_try_rotate_smollm2 (cli_try_rotate)
foreach(t cli_sparsity_smollm2 cli_try_rotate_smollm2)
  if(TEST ${t})
    get_test_property(${t} LABELS _labels)
    set_tests_properties(${t} PROPERTIES LABELS "${_labels};full")
  endif()
endforeach()
