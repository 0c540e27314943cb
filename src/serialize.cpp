// src/serialize.cpp
