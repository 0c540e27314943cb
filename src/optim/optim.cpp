// src/optim/optim.cpp
