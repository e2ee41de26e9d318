//! Thin helpers over `object`'s low-level ELF reader, shared by the AMD, NVIDIA and host paths.

use crate::error::{IsaError, Result};
use object::elf::{FileHeader64, SectionHeader64};
use object::read::elf::{FileHeader, SectionHeader, SectionTable, Sym, SymbolTable};
use object::Endianness;

pub const EM_CUDA: u16 = 190;
pub const EM_AMDGPU: u16 = 224;
pub const ELFOSABI_AMDGPU_HSA: u8 = 64;

pub type Shdr = SectionHeader64<Endianness>;

/// One ELF note: (name, type, descriptor).
pub type Note<'a> = (&'a [u8], u32, &'a [u8]);

pub struct Elf<'a> {
    pub data: &'a [u8],
    pub hdr: &'a FileHeader64<Endianness>,
    pub endian: Endianness,
    pub sections: SectionTable<'a, FileHeader64<Endianness>>,
}

fn oe(what: &'static str) -> impl Fn(object::read::Error) -> IsaError {
    move |e| IsaError::malformed(what, e.to_string())
}

impl<'a> Elf<'a> {
    pub fn parse(data: &'a [u8], what: &'static str) -> Result<Elf<'a>> {
        if data.len() >= 5 && data[4] == 1 {
            return Err(IsaError::unsupported(what, "32-bit ELF"));
        }
        let hdr = FileHeader64::<Endianness>::parse(data).map_err(oe(what))?;
        let endian = hdr.endian().map_err(oe(what))?;
        let sections = hdr.sections(endian, data).map_err(oe(what))?;
        Ok(Elf { data, hdr, endian, sections })
    }

    pub fn machine(&self) -> u16 {
        self.hdr.e_machine(self.endian)
    }
    pub fn flags(&self) -> u32 {
        self.hdr.e_flags(self.endian)
    }
    pub fn os_abi(&self) -> u8 {
        self.hdr.e_ident().os_abi
    }
    pub fn abi_version(&self) -> u8 {
        self.hdr.e_ident().abi_version
    }

    pub fn section_name(&self, sh: &Shdr) -> &'a [u8] {
        self.sections.section_name(self.endian, sh).unwrap_or_default()
    }

    pub fn section(&self, index: usize) -> Option<&'a Shdr> {
        self.sections.section(object::SectionIndex(index)).ok()
    }

    /// Section contents; NOBITS sections give an empty slice.
    pub fn section_data(&self, sh: &Shdr, what: &'static str) -> Result<&'a [u8]> {
        sh.data(self.endian, self.data).map_err(oe(what))
    }

    /// File range of a section (for slicing a shared blob without copying).
    pub fn section_range(&self, sh: &Shdr) -> Option<std::ops::Range<u64>> {
        let (off, size) = sh.file_range(self.endian)?;
        let end = off.checked_add(size)?;
        (end <= self.data.len() as u64).then_some(off..end)
    }

    pub fn iter_sections(&self) -> impl Iterator<Item = (usize, &'a Shdr)> + '_ {
        self.sections.iter().enumerate()
    }

    pub fn symtab(&self, what: &'static str) -> Result<SymbolTable<'a, FileHeader64<Endianness>>> {
        self.sections.symbols(self.endian, self.data, object::elf::SHT_SYMTAB).map_err(oe(what))
    }

    /// All notes of all SHT_NOTE sections as (name, type, desc).
    pub fn notes(&self, what: &'static str) -> Result<Vec<Note<'a>>> {
        let mut out = Vec::new();
        for sh in self.sections.iter() {
            if let Some(mut it) = sh.notes(self.endian, self.data).map_err(oe(what))? {
                while let Some(n) = it.next().map_err(oe(what))? {
                    out.push((n.name(), n.n_type(self.endian), n.desc()));
                }
            }
        }
        Ok(out)
    }
}

pub struct SymInfo<'a> {
    pub index: usize,
    pub name: &'a str,
    pub value: u64,
    /// Read by the oracle's kernel code ranges only.
    #[cfg_attr(not(feature = "oracle"), allow(dead_code))]
    pub size: u64,
    pub shndx: u16,
    pub st_type: u8,
    pub other: u8,
}

pub fn symbols<'a>(elf: &Elf<'a>, what: &'static str) -> Result<Vec<SymInfo<'a>>> {
    let st = elf.symtab(what)?;
    let mut out = Vec::with_capacity(st.len());
    for (i, s) in st.iter().enumerate() {
        let name = st.symbol_name(elf.endian, s).ok().and_then(|n| std::str::from_utf8(n).ok()).unwrap_or("");
        out.push(SymInfo {
            index: i,
            name,
            value: s.st_value(elf.endian),
            size: s.st_size(elf.endian),
            shndx: s.st_shndx(elf.endian),
            st_type: s.st_type(),
            other: s.st_other(),
        });
    }
    Ok(out)
}
