// src/nn/module.cpp
