# Included by CMake right after llama.cpp's own project() call when scripts/setup.sh builds llama-cpp-python
# (CMAKE_PROJECT_llama.cpp_INCLUDE). llama-cpp-python forces LLAMA_BUILD_COMMON on in its cache, so -D cannot
# turn it off; a normal variable in llama.cpp's directory scope shadows that cache entry. llama.cpp's "common"
# library (chat templates, argument parsing, an HTTP client: ~34k lines of C++ plus cpp-httplib) is for
# llama.cpp's own programs: the Python package loads only libllama and libggml*, and the targets it ships are
# built exactly as before.
set(LLAMA_BUILD_COMMON OFF)
