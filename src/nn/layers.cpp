// src/nn/layers.cpp
