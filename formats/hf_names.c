/* formats/hf_names.c - placeholder. */
