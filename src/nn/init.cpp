// src/nn/init.cpp
