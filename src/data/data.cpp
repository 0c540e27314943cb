// src/data/data.cpp
