/* formats/gguf_names.c - placeholder. */
