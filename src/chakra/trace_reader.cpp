// placeholder while the Chakra layer is written
